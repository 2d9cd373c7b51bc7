/* The plain-ACL request signature in one call (optional; `shoal.protocol.acl_signature` falls back
 * to the same computation in Python when this module was not built).
 *
 * Why C: a signature is Base64(HmacSHA1(secret, values of the sorted extFields + body)). In Python
 * that is about fifteen calls into hashlib, each allocating an OpenSSL context; on a broker's send
 * path they cost 4-6 us a request, several times the hashing itself. Here the keyed SHA-1 states
 * are plain structs copied by value and each value is hashed straight from its str's UTF-8 form.
 *
 * keyed_states(key: bytes) -> bytes
 *     The SHA-1 states after the inner and the outer pad of an HMAC key (RFC 2104), already
 *     reduced to the block size by the caller. Opaque bytes for `signature`; never leave memory.
 * signature(states: bytes, keys: tuple[str, ...], fields: dict[str, str], body) -> str | None
 *     Base64 of the HMAC over the UTF-8 values of `keys` in `fields` (in that order) and `body`
 *     (None or any contiguous buffer). None when a value is not UTF-8 encodable (a lone
 *     surrogate): the caller then takes the Python path, which replaces it as Java does.
 */
#define PY_SSIZE_T_CLEAN
#define OPENSSL_SUPPRESS_DEPRECATED /* SHA1_Init & co.: the only OpenSSL API without a context allocation */
#include <Python.h>
#include <openssl/sha.h>

#define HMAC_BLOCK_BYTES 64
#define BASE64_SHA1_CHARS 28

typedef struct {
    SHA_CTX inner;
    SHA_CTX outer;
} KeyedStates;

static PyObject *
keyed_states(PyObject *module, PyObject *arg)
{
    Py_buffer key;
    unsigned char pad[HMAC_BLOCK_BYTES];
    KeyedStates states;

    if (PyObject_GetBuffer(arg, &key, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    if (key.len > HMAC_BLOCK_BYTES) {
        PyBuffer_Release(&key);
        PyErr_SetString(PyExc_ValueError, "an HMAC key longer than the block size must be hashed first");
        return NULL;
    }
    memset(pad, 0, sizeof(pad));
    memcpy(pad, key.buf, (size_t)key.len);
    PyBuffer_Release(&key);
    for (int i = 0; i < HMAC_BLOCK_BYTES; i++) {
        pad[i] ^= 0x36;
    }
    SHA1_Init(&states.inner);
    SHA1_Update(&states.inner, pad, sizeof(pad));
    for (int i = 0; i < HMAC_BLOCK_BYTES; i++) {
        pad[i] ^= 0x36 ^ 0x5c;
    }
    SHA1_Init(&states.outer);
    SHA1_Update(&states.outer, pad, sizeof(pad));
    return PyBytes_FromStringAndSize((const char *)&states, sizeof(states));
}

static const char BASE64_ALPHABET[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static PyObject *
signature(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "signature(states, keys, fields, body) takes 4 arguments");
        return NULL;
    }
    PyObject *states_obj = args[0], *keys = args[1], *fields = args[2], *body_obj = args[3];
    if (!PyBytes_Check(states_obj) || PyBytes_GET_SIZE(states_obj) != (Py_ssize_t)sizeof(KeyedStates)) {
        PyErr_SetString(PyExc_TypeError, "states must come from keyed_states()");
        return NULL;
    }
    if (!PyTuple_Check(keys) || !PyDict_Check(fields)) {
        PyErr_SetString(PyExc_TypeError, "keys must be a tuple and fields a dict");
        return NULL;
    }
    KeyedStates states;
    memcpy(&states, PyBytes_AS_STRING(states_obj), sizeof(states));

    Py_ssize_t count = PyTuple_GET_SIZE(keys);
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *value = PyDict_GetItemWithError(fields, PyTuple_GET_ITEM(keys, i));
        if (value == NULL) {
            if (!PyErr_Occurred()) {
                PyErr_SetObject(PyExc_KeyError, PyTuple_GET_ITEM(keys, i));
            }
            return NULL;
        }
        if (!PyUnicode_Check(value)) {
            PyErr_SetString(PyExc_TypeError, "extFields values must be str");
            return NULL;
        }
        Py_ssize_t size;
        const char *utf8 = PyUnicode_AsUTF8AndSize(value, &size);
        if (utf8 == NULL) {
            if (!PyErr_ExceptionMatches(PyExc_UnicodeEncodeError)) {
                return NULL;
            }
            PyErr_Clear();
            Py_RETURN_NONE;
        }
        SHA1_Update(&states.inner, utf8, (size_t)size);
    }
    if (body_obj != Py_None) {
        Py_buffer body;
        if (PyObject_GetBuffer(body_obj, &body, PyBUF_SIMPLE) < 0) {
            return NULL;
        }
        SHA1_Update(&states.inner, body.buf, (size_t)body.len);
        PyBuffer_Release(&body);
    }
    unsigned char digest[SHA_DIGEST_LENGTH];
    SHA1_Final(digest, &states.inner);
    SHA1_Update(&states.outer, digest, sizeof(digest));
    SHA1_Final(digest, &states.outer);

    /* 20 bytes: six full 3-byte groups, then 2 bytes and one '=' of padding. */
    char text[BASE64_SHA1_CHARS];
    int out = 0;
    for (int i = 0; i < 18; i += 3) {
        unsigned int group = ((unsigned int)digest[i] << 16) | ((unsigned int)digest[i + 1] << 8) | digest[i + 2];
        text[out++] = BASE64_ALPHABET[(group >> 18) & 63];
        text[out++] = BASE64_ALPHABET[(group >> 12) & 63];
        text[out++] = BASE64_ALPHABET[(group >> 6) & 63];
        text[out++] = BASE64_ALPHABET[group & 63];
    }
    unsigned int last = ((unsigned int)digest[18] << 16) | ((unsigned int)digest[19] << 8);
    text[out++] = BASE64_ALPHABET[(last >> 18) & 63];
    text[out++] = BASE64_ALPHABET[(last >> 12) & 63];
    text[out++] = BASE64_ALPHABET[(last >> 6) & 63];
    text[out++] = '=';
    return PyUnicode_FromKindAndData(PyUnicode_1BYTE_KIND, text, out);
}

static PyMethodDef methods[] = {
    {"keyed_states", keyed_states, METH_O, "SHA-1 states after an HMAC key's inner and outer pads."},
    {"signature", (PyCFunction)(void (*)(void))signature, METH_FASTCALL,
     "Base64 HMAC-SHA1 over the values of keys in fields, then body (None: not UTF-8 encodable)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "shoal.protocol._acl_speedups", NULL, 0, methods,
};

PyMODINIT_FUNC
PyInit__acl_speedups(void)
{
    return PyModuleDef_Init(&module_def);
}
