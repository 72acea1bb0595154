"""XGrammar structural tags (free text, tags, triggered tool calls) as one token
automaton: compile_structural_tag."""
from .compile import StructuralTagInfo, StructuralTagOptions, compile_structural_tag
from .spec import StructuralTagError

__all__ = ["compile_structural_tag", "StructuralTagOptions", "StructuralTagInfo", "StructuralTagError"]
