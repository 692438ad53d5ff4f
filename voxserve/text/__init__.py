"""Text processing for speech synthesis: spoken forms of numbers and symbols, and incremental segmentation.

Pure Python; imports nothing from the project except :mod:`voxserve.errors`.
"""

from voxserve.text.numbers import cardinal, decimal, digits, ordinal, year
from voxserve.text.segment import SegmenterParams, TextSegment, TextSegmenter
from voxserve.text.speakable import to_speakable

__all__ = [
    "SegmenterParams",
    "TextSegment",
    "TextSegmenter",
    "cardinal",
    "decimal",
    "digits",
    "ordinal",
    "to_speakable",
    "year",
]
