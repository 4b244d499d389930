"""Cost model: kernel features, training and prediction (see the cost-model issue)."""
