"""Speaker diarization backends: local speaker segmentation and speaker embedders (ONNX Runtime).

Everything here loads lazily; the model packages come with the ``voxserve[diarize]`` extra.
"""
