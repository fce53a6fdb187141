"""Old import path of :mod:`capeval.judges.images`."""

from capeval.judges.images import IMAGE_EXTENSIONS, data_url, digest, expand_to_square, mean_fill, resolve_images, to_pil

__all__ = ["IMAGE_EXTENSIONS", "data_url", "digest", "expand_to_square", "mean_fill", "resolve_images", "to_pil"]
