"""Ship a compiled constraint to another process: `dumps(constraint)` there, `loads(data,
vocab)` here.

A compiled constraint is lazy (docs/automaton.md): it keeps its term builder and its
front end's compiler, whose deferred parts are closures, so that its states can still be
built after it arrives. `dumps` pickles that whole graph, except:

- the vocabulary, its trie and byte columns: by reference; `loads` puts the receiver's
  own in their place (same tokens: checked by size, length and EOS ids);
- locks: fresh ones on arrival;
- module-level objects of structgen.fsm (sentinels compared with `is`, process-wide
  caches): by name, the receiver's own;
- closures and lambdas: by code, so both processes must run the same Python and the
  same structgen (a process pool's workers do).

Read-only arrays (the shared masks) stay read-only: pickle protocol 5 keeps the flag.

    >>> data = dumps(fsm.compile_regex("[0-9]+", vocab))         # doctest: +SKIP
    >>> loads(data, vocab).matcher()                               # doctest: +SKIP
"""
from __future__ import annotations

import importlib
import io
import marshal
import pickle
import sys
import threading
import types

from .errors import ConstraintError
from .terms import paused_gc

_PACKAGE = __name__.rsplit(".", 2)[0]       # structgen.fsm
_LOCKS = {type(threading.Lock()): threading.Lock, type(threading.RLock()): threading.RLock}
# Module globals of these types are values (or are pickled by name anyway): not by reference.
_VALUES = (int, float, complex, str, bytes, bool, type(None), tuple, frozenset, range, type,
           types.ModuleType, types.FunctionType, types.BuiltinFunctionType)


def dumps(constraint) -> bytes:
    """The constraint as bytes for `loads` in another process (same Python, same structgen)."""
    out = io.BytesIO()
    _Pickler(out, constraint.vocab).dump(constraint)
    return out.getvalue()


def loads(data: bytes, vocab):
    """The constraint that `dumps` wrote, over this process's `vocab`."""
    with paused_gc():          # (tens of thousands of small objects: one young collection)
        c = _Unpickler(io.BytesIO(data), vocab).load()
        paused_gc().collect_young()
    return c


def _vocab_id(vocab) -> tuple:
    return vocab.size, len(vocab.token_bytes), tuple(vocab.eos_ids)


def _module_objects() -> dict:
    """id -> (module, name) of the fsm modules' globals that are objects, not values."""
    out = {}
    for name, mod in list(sys.modules.items()):
        if mod is None or not (name == _PACKAGE or name.startswith(_PACKAGE + ".")):
            continue
        for k, v in list(vars(mod).items()):
            if not isinstance(v, _VALUES) and not k.startswith("__"):
                out.setdefault(id(v), (name, k))
    return out


class _Pickler(pickle.Pickler):
    def __init__(self, file, vocab):
        super().__init__(file, protocol=5)
        self._vocab = {id(vocab): ("vocab", _vocab_id(vocab))}
        for part in ("trie", "columns", "token_bytes"):
            self._vocab[id(getattr(vocab, part))] = (part,)
        self._objects = _module_objects()

    def persistent_id(self, obj):
        i = id(obj)
        ref = self._vocab.get(i)
        if ref is not None:
            return ref
        t = type(obj)
        if t in _LOCKS:
            return ("lock", t is _RLOCK)
        ref = self._objects.get(i)
        return None if ref is None else ("global",) + ref

    def reducer_override(self, obj):
        t = type(obj)
        if t is types.FunctionType and ("<locals>" in obj.__qualname__ or "<lambda>" in obj.__qualname__):
            return _function, (marshal.dumps(obj.__code__), obj.__module__, obj.__name__, obj.__defaults__,
                               obj.__kwdefaults__, obj.__closure__)
        if t is types.CellType:
            try:
                return _cell, (), (obj.cell_contents,), None, None, _fill_cell
            except ValueError:   # (an empty cell)
                return _cell, ()
        return NotImplemented


_RLOCK = type(threading.RLock())


class _Unpickler(pickle.Unpickler):
    def __init__(self, file, vocab):
        super().__init__(file)
        self._vocab = vocab

    def persistent_load(self, pid):
        kind = pid[0]
        if kind == "vocab":
            if pid[1] != _vocab_id(self._vocab):
                raise ConstraintError(f"a constraint compiled for another vocabulary (size, tokens, EOS ids "
                                      f"{pid[1]}) cannot be loaded over this one ({_vocab_id(self._vocab)})")
            return self._vocab
        if kind in ("trie", "columns", "token_bytes"):
            return getattr(self._vocab, kind)
        if kind == "lock":
            return threading.RLock() if pid[1] else threading.Lock()
        if kind == "global":
            return getattr(importlib.import_module(pid[1]), pid[2])
        raise pickle.UnpicklingError(f"unknown reference {pid!r}")


def _function(code, module, name, defaults, kwdefaults, closure):
    f = types.FunctionType(marshal.loads(code), importlib.import_module(module).__dict__, name, defaults, closure)
    f.__kwdefaults__ = kwdefaults
    return f


def _cell():
    return types.CellType()


def _fill_cell(cell, state):
    cell.cell_contents = state[0]
