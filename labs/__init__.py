"""k8s-arch-lab: checks that show, claim by claim, how Kubernetes is built."""

__version__ = "0.1.0"
