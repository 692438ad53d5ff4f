"""The prepared GPU benchmark: ``run.sh`` (entry point), ``bench.py`` (the steps), ``random_whisper.py`` (a
large-v3-turbo-shaped model with random weights), ``cublas.py`` (finding cuBLAS 12), ``pack.sh`` (packages
for a machine without network). See docs/scale.md."""
