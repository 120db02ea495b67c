"""tfk8s's component package: its components as any Pulumi language declares them (package/,
docs/guide/package.md). `args` is generated from the schema's models (hack/package_args.py);
`training_cluster` is the component. The package's version is tfk8s's (tfk8s.release)."""

from tfk8s.release import VERSION

__all__ = ["VERSION"]
