"""Replicas in the units people rent: sizing, instances, the price book."""
