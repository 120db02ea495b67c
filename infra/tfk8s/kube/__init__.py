"""The Kubernetes API as tfk8s talks to it: objects as the provider's resources (`objects`), the API's
paths (`api_paths`), kubeconfig exec credentials, and what `pulumi up` waits for (`awaits`).

The bottom layer: it imports nothing else of tfk8s (the import-linter contracts in pyproject.toml).
"""
