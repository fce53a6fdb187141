"""Region proposals for region-level metrics (HICE-S segments each image into masks {A_n}).

``region_backend(name, **options)`` gives a :class:`RegionBackend` whose ``masks(image)``
returns :class:`Region` objects (bool mask at the image's size, score, bbox, area):

- ``"sam"``: SAM's segment-everything mode on a transformers ``SamModel`` (torch only);
- ``"mobilesamv2"``: the paper's MobileSAMv2, only when its code and weights are installed;
- ``"grid"``: fixed rectangles, a no-weights fallback.

Importing this package loads nothing heavy (torch/transformers load with the ``"sam"`` backend).
"""

from capeval.models.regions.base import Region, RegionBackend, mask_bbox
from capeval.models.regions.registry import BACKENDS, region_backend

__all__ = ["BACKENDS", "Region", "RegionBackend", "mask_bbox", "region_backend"]
