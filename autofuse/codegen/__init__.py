"""codegen."""

# Bumped when generated kernels change in a way that changes what a kernel's source features mean
# (a cost model trained on the old code is then refused, not used silently).
CODEGEN_VERSION = 1
