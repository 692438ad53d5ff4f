"""Scoring: word and character error rates with text normalization (``normalize``, ``wer``)."""
