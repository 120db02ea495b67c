"""The Kubernetes API as tfk8s talks to it: objects as the provider's resources (`objects`), the API's
paths (`api_paths`) and its errors (`api_error`), kubeconfig exec credentials, what `pulumi up`
waits for (`awaits`), and a Secret's value read with the caller's credentials (`secrets`).

The bottom layer: it imports nothing else of tfk8s (the import-linter contracts in pyproject.toml).
"""
