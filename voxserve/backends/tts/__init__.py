"""Speech synthesis backends: acoustic models (text -> frames) and audio decoders (frames -> samples)."""
