"""What every compile_* returns: a Constraint, and one Matcher per request from it."""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .matcher import Matcher
    from .vocabulary import Vocabulary


class Constraint:
    """A compiled constraint over one vocabulary: immutable, shared by any number of
    requests and threads, cached per vocabulary by its spec and options.

    `matcher()` makes the per-request Matcher. `info` is what the front end knows of the
    outputs, typed per front end (a JSON Schema's: `fsm.json.JsonInfo`, key order and
    canonical text), else None. Subclasses: TokenAutomaton (regexes, choices, schemas,
    grammars) and the JSON front end's UnionAutomaton.
    """

    vocab: Vocabulary
    description: str = ""
    info: object = None

    def matcher(self) -> Matcher:
        raise NotImplementedError

    def require_output(self) -> Constraint:
        """self, or ConstraintError where no output can begin."""
        raise NotImplementedError
