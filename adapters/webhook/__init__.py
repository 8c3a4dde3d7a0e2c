"""The Pod admission webhook: gating Pods subject to queueing, and its certificates."""
