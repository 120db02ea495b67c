"""The Kubernetes API as tfk8s talks to it: objects as the provider's resources (`objects`), the API's
paths (`api_paths`) and its errors (`api_error`), kubeconfig exec credentials, what `pulumi up`
waits for (`awaits`), and a Secret's value read with the caller's credentials (`secrets`).

Beneath every layer but the errors and the Pulumi adapters. Inside it, the provider's object classes
(`objects`, which declare) sit above the plain client, which touches no Pulumi: the checks, the
command, GitOps and the doctor use it without the SDK (the import-linter contracts in pyproject.toml).
"""
