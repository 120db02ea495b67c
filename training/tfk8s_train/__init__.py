"""tfk8s training: distributed TensorFlow (PS/worker, between-graph and in-graph) on Kubernetes.

Kept free of imports on purpose: ``python -m tfk8s_train.launch`` imports this package in stock
images that have no TensorFlow-side dependencies beyond the standard library.
"""
