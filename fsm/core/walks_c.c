/* The two walks of the vocabulary through a lazy DFA table, in C: every mask of a new
 * state runs one, over up to hundreds of thousands of trie nodes or token bytes, where
 * numpy's per-level calls and Python's per-node steps cost far more than the steps.
 *
 * Both read the table `int32[states][256]` (UNKNOWN = -1: a cell not computed yet; 0: the
 * dead state) and never compute a cell: they stop at an UNKNOWN one and report it, the
 * caller computes the reported cells (walks.py) and calls again to resume. Buffers come
 * from numpy arrays through the buffer protocol; their sizes are checked here. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#define UNKNOWN (-1)

static int get(PyObject *o, Py_buffer *b, int writable, Py_ssize_t itemsize, const char *what) {
    if (PyObject_GetBuffer(o, b, PyBUF_C_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0)) < 0)
        return -1;
    if (b->itemsize != itemsize) {
        PyErr_Format(PyExc_TypeError, "%s: items of %zd bytes expected, got %zd", what, itemsize, b->itemsize);
        PyBuffer_Release(b);
        return -1;
    }
    return 0;
}

/* trie(table, byte, depth, size, token, flat, stack, p, end, flags, out_node, out_state, n_out)
 *   -> (p, n_out)
 * A walk of the trie's nodes in depth-first order (arrays by that order: each node's last
 * byte, depth, subtree size counting itself, token id or -1, flat id) from position p to
 * end. stack[d] holds the state at depth d: the walk's start (stack[depth[p]]) is set by
 * the caller, and a live node at depth d sets stack[d + 1] for its children; a dead node's
 * subtree is skipped whole. A live node stores 1 at flags[its token] (uint8; the last entry takes the nodes
 * without a token) and, where out_node is not None, its flat id and state at out_node,
 * out_state[n_out...]. The walk stops at an UNKNOWN cell: it returns that node's position
 * (the caller computes the cell, stack[depth[p]] and byte[p], and calls again from p),
 * or end when done. */
static PyObject *trie(PyObject *self, PyObject *args) {
    PyObject *o[10];
    Py_ssize_t p, end, nout;
    if (!PyArg_ParseTuple(args, "OOOOOOOnnOOOn", &o[0], &o[1], &o[2], &o[3], &o[4], &o[5], &o[6], &p, &end,
                          &o[7], &o[8], &o[9], &nout))
        return NULL;
    int nbuf = o[8] == Py_None ? 8 : 10, got = 0;
    Py_buffer b[10];
    const Py_ssize_t size[10] = {4, 1, 4, 4, 4, 4, 4, 1, 4, 4};
    const int writable[10] = {0, 0, 0, 0, 0, 0, 1, 1, 1, 1};
    for (; got < nbuf; got++)
        if (get(o[got], &b[got], writable[got], size[got], "trie walk") < 0)
            goto fail;
    const int32_t *table = b[0].buf, *depth = b[2].buf, *sub = b[3].buf, *token = b[4].buf, *flat = b[5].buf;
    const uint8_t *byte = b[1].buf;
    int32_t *stack = b[6].buf;
    uint8_t *flags = b[7].buf;
    int32_t *out_n = nbuf == 10 ? b[8].buf : NULL, *out_s = nbuf == 10 ? b[9].buf : NULL;
    Py_ssize_t cells = b[0].len / 4, n = b[1].len, nstack = b[6].len / 4, nflags = b[7].len;
    Py_ssize_t cap = nbuf == 10 ? b[8].len / 4 : 0;
    int32_t scratch = (int32_t)(nflags - 1);
    if (b[2].len / 4 != n || b[3].len / 4 != n || b[4].len / 4 != n || b[5].len / 4 != n || nflags < 1
        || p < 0 || end > n || (nbuf == 10 && (b[9].len / 4 != cap || nout < 0 || nout + (end - p) > cap))) {
        PyErr_SetString(PyExc_ValueError, "trie walk: inconsistent buffer sizes");
        goto fail;
    }
    while (p < end) {
        int32_t d = depth[p];
        if (d < 0 || d + 1 >= nstack || stack[d] < 0 || ((int64_t)stack[d] + 1) * 256 > cells) {
            PyErr_SetString(PyExc_IndexError, "trie walk: depth or state out of range");
            goto fail;
        }
        int32_t nxt = table[(int64_t)stack[d] * 256 + byte[p]];
        if (nxt == UNKNOWN) break;
        if (__builtin_expect(nxt > 0, 1)) {  /* (a branch, not a select: p++ is the likely case, and
                                                    predicting it lets the next nodes' loads start early) */
            int32_t t = token[p];
            stack[d + 1] = nxt;
            flags[(t >= 0 && t < scratch) ? t : scratch] = 1;
            if (out_n) {
                out_n[nout] = flat[p];
                out_s[nout++] = nxt;
            }
            p++;
        } else {
            p += sub[p] > 0 ? sub[p] : 1;
        }
    }
    for (int i = 0; i < nbuf; i++) PyBuffer_Release(&b[i]);
    return Py_BuildValue("nn", p, nout);
fail:
    for (int i = 0; i < got; i++) PyBuffer_Release(&b[i]);
    return NULL;
}

/* tokens(table, data, start, length, state, at, stuck) -> number stuck
 * Token k's bytes are data[start[k] : start[k] + length[k]]; it is in state[k] after its
 * first at[k] bytes. Each is stepped to its end or its death (state 0); one that meets
 * an UNKNOWN cell stops before that byte (state[k] and at[k] say where) and its index
 * goes to `stuck`. */
static PyObject *tokens(PyObject *self, PyObject *args) {
    PyObject *o[7];
    if (!PyArg_ParseTuple(args, "OOOOOOO", &o[0], &o[1], &o[2], &o[3], &o[4], &o[5], &o[6]))
        return NULL;
    Py_buffer b[7];
    const Py_ssize_t size[7] = {4, 1, 8, 4, 4, 4, 8};
    const int writable[7] = {0, 0, 0, 0, 1, 1, 1};
    int got = 0;
    for (; got < 7; got++)
        if (get(o[got], &b[got], writable[got], size[got], "token walk") < 0)
            goto fail;
    const int32_t *table = b[0].buf, *length = b[3].buf;
    const uint8_t *data = b[1].buf;
    const int64_t *start = b[2].buf;
    int32_t *state = b[4].buf, *at = b[5].buf;
    int64_t *stuck = b[6].buf;
    Py_ssize_t cells = b[0].len / 4, n = b[2].len / 8, nstuck = 0;
    if (b[3].len / 4 != n || b[4].len / 4 != n || b[5].len / 4 != n || b[6].len / 8 < n) {
        PyErr_SetString(PyExc_ValueError, "token walk: inconsistent buffer sizes");
        goto fail;
    }
    for (Py_ssize_t k = 0; k < n; k++) {
        int64_t s = state[k], i = at[k], end = length[k];
        if (start[k] < 0 || start[k] + end > b[1].len || i < 0) {
            PyErr_SetString(PyExc_IndexError, "token walk: token bytes out of range");
            goto fail;
        }
        const uint8_t *p = data + start[k];
        for (; i < end && s > 0; i++) {
            if (s * 256 + 256 > cells) {
                PyErr_SetString(PyExc_IndexError, "token walk: state out of range");
                goto fail;
            }
            int32_t nxt = table[s * 256 + p[i]];
            if (nxt == UNKNOWN) {
                stuck[nstuck++] = k;
                break;
            }
            s = nxt;
        }
        state[k] = (int32_t)s;
        at[k] = (int32_t)i;
    }
    for (int i = 0; i < 7; i++) PyBuffer_Release(&b[i]);
    return PyLong_FromSsize_t(nstuck);
fail:
    for (int i = 0; i < got; i++) PyBuffer_Release(&b[i]);
    return NULL;
}

static PyMethodDef methods[] = {
    {"trie", trie, METH_VARARGS, "Depth-first walk of trie nodes through a DFA table (see walks_c.c)."},
    {"tokens", tokens, METH_VARARGS, "Walk of token byte strings through a DFA table (see walks_c.c)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "walks_c", NULL, -1, methods};

PyMODINIT_FUNC PyInit_walks_c(void) { return PyModule_Create(&module); }
