"""Presenting results: units, tables, JSON rows, Perfetto traces and plots."""
