"""Built-in models: the seed examples, classic multi-branch CNNs, transformers, random DAGs.

The registry never imports torch itself: torch models live in their own modules
and are imported only when asked for.
"""

from streamplan.zoo.registry import ZOO, ZooModel, get_model, zoo_names

__all__ = ["ZOO", "ZooModel", "get_model", "zoo_names"]
