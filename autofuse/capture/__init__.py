"""Capture: Dynamo + AOTAutograd into functional ATen graphs, and model files."""
