"""Text backends (blocking): sentence embeddings for retrieval."""
