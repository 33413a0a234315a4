"""dranet-cloud plugin for CoreWeave Kubernetes Service (CKS).

CKS has no instance metadata server: a node's fabric, rack and InfiniBand
neighbours are labels on its Kubernetes Node object, which this plugin reads
through the core's Kubernetes facts source (``context.node``).
"""
