"""JSON Schemas (and Pydantic models) as constraints: compile_json_schema."""
from . import prepare  # noqa: F401 (registers the per-vocabulary tables: Vocabulary.prepare)
from .options import JsonOptions
from .schema import JsonInfo, compile_json_schema

__all__ = ["JsonOptions", "JsonInfo", "compile_json_schema"]
