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
 * sign(states: bytes, fields: dict[str, str], body) -> str | None
 *     `signature` over every key but "Signature", put in Java TreeMap order here.
 * verify(states: bytes, fields: dict[str, str], body) -> bool | None
 *     Whether fields["Signature"] is the signature over every key but "Signature" and
 *     "_UNIQUE_KEY_QUERY", or (when that key is there) over every key but "Signature": the broker's
 *     whole check in one call, compared in constant time.
 * sign and verify return None where the Python path must decide: a key that is not ASCII (Java
 * orders keys by UTF-16 code units; for ASCII that is byte order), more than SORTED_KEYS_MAX keys, a
 * value that is not a str or not UTF-8 encodable, a Signature that is not an ASCII str.
 */
#define PY_SSIZE_T_CLEAN
#define OPENSSL_SUPPRESS_DEPRECATED /* SHA1_Init & co.: the only OpenSSL API without a context allocation */
#include <Python.h>
#include <openssl/sha.h>

#define HMAC_BLOCK_BYTES 64
#define BASE64_SHA1_CHARS 28
#define SORTED_KEYS_MAX 64 /* a request header has 10-20; more goes to the Python path */

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

/* Base64 of a SHA-1 digest into text[BASE64_SHA1_CHARS]: six full 3-byte groups, then 2 bytes
 * and one '=' of padding. */
static void
base64_sha1(const unsigned char *digest, char *text)
{
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
    text[out] = '=';
}

/* The HMAC's outer step and Base64: `inner` has hashed the content. */
static void
finish(SHA_CTX *inner, SHA_CTX *outer, char *text)
{
    unsigned char digest[SHA_DIGEST_LENGTH];
    SHA1_Final(digest, inner);
    SHA1_Update(outer, digest, sizeof(digest));
    SHA1_Final(digest, outer);
    base64_sha1(digest, text);
}

static int
states_from(PyObject *states_obj, KeyedStates *states)
{
    if (!PyBytes_Check(states_obj) || PyBytes_GET_SIZE(states_obj) != (Py_ssize_t)sizeof(KeyedStates)) {
        PyErr_SetString(PyExc_TypeError, "states must come from keyed_states()");
        return -1;
    }
    memcpy(states, PyBytes_AS_STRING(states_obj), sizeof(*states));
    return 0;
}

/* Hash `body` (None or a contiguous buffer) into `inner`; -1 with an exception set. */
static int
hash_body(SHA_CTX *inner, PyObject *body_obj)
{
    if (body_obj == Py_None) {
        return 0;
    }
    Py_buffer body;
    if (PyObject_GetBuffer(body_obj, &body, PyBUF_SIMPLE) < 0) {
        return -1;
    }
    SHA1_Update(inner, body.buf, (size_t)body.len);
    PyBuffer_Release(&body);
    return 0;
}

/* A value's UTF-8 form; NULL with no exception set when it is not a str or not UTF-8 encodable
 * (the Python path decides), NULL with one set on other errors. */
static const char *
value_utf8(PyObject *value, Py_ssize_t *size)
{
    if (!PyUnicode_Check(value)) {
        return NULL;
    }
    const char *utf8 = PyUnicode_AsUTF8AndSize(value, size);
    if (utf8 == NULL && PyErr_ExceptionMatches(PyExc_UnicodeEncodeError)) {
        PyErr_Clear();
    }
    return utf8;
}

static PyObject *
signature(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "signature(states, keys, fields, body) takes 4 arguments");
        return NULL;
    }
    PyObject *keys = args[1], *fields = args[2];
    KeyedStates states;
    if (states_from(args[0], &states) < 0) {
        return NULL;
    }
    if (!PyTuple_Check(keys) || !PyDict_Check(fields)) {
        PyErr_SetString(PyExc_TypeError, "keys must be a tuple and fields a dict");
        return NULL;
    }
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
        const char *utf8 = value_utf8(value, &size);
        if (utf8 == NULL) {
            if (PyErr_Occurred()) {
                return NULL;
            }
            Py_RETURN_NONE;
        }
        SHA1_Update(&states.inner, utf8, (size_t)size);
    }
    if (hash_body(&states.inner, args[3]) < 0) {
        return NULL;
    }
    char text[BASE64_SHA1_CHARS];
    finish(&states.inner, &states.outer, text);
    return PyUnicode_FromKindAndData(PyUnicode_1BYTE_KIND, text, BASE64_SHA1_CHARS);
}

typedef struct {
    const char *key;
    Py_ssize_t key_size;
    const char *value;
    Py_ssize_t value_size;
} Field;

static int
field_before(const Field *a, const Field *b)
{
    Py_ssize_t shorter = a->key_size < b->key_size ? a->key_size : b->key_size;
    int order = memcmp(a->key, b->key, (size_t)shorter);
    return order < 0 || (order == 0 && a->key_size < b->key_size);
}

/* The fields in Java TreeMap order (ASCII keys: byte order), leaving out "Signature" and, unless
 * `with_unique`, "_UNIQUE_KEY_QUERY". Returns their count; -1 with an exception set; -2 where the
 * Python path must decide. `*unique_seen` tells whether "_UNIQUE_KEY_QUERY" was there. */
static Py_ssize_t
sorted_fields(PyObject *fields, Field *sorted, int with_unique, int *unique_seen)
{
    Py_ssize_t position = 0, count = 0;
    PyObject *key, *value;
    *unique_seen = 0;
    while (PyDict_Next(fields, &position, &key, &value)) {
        if (!PyUnicode_Check(key) || !PyUnicode_IS_ASCII(key)) {
            return -2;
        }
        Py_ssize_t key_size = PyUnicode_GET_LENGTH(key);
        const char *key_text = (const char *)PyUnicode_DATA(key);
        if (key_size == 9 && memcmp(key_text, "Signature", 9) == 0) {
            continue;
        }
        if (key_size == 17 && memcmp(key_text, "_UNIQUE_KEY_QUERY", 17) == 0) {
            *unique_seen = 1;
            if (!with_unique) {
                continue;
            }
        }
        if (count == SORTED_KEYS_MAX) {
            return -2;
        }
        Field field = {key_text, key_size, NULL, 0};
        field.value = value_utf8(value, &field.value_size);
        if (field.value == NULL) {
            return PyErr_Occurred() ? -1 : -2;
        }
        Py_ssize_t at = count++;
        while (at > 0 && field_before(&field, &sorted[at - 1])) { /* insertion: a header is short */
            sorted[at] = sorted[at - 1];
            at--;
        }
        sorted[at] = field;
    }
    return count;
}

/* The signature over `fields` (see sorted_fields) and body into text; 0, -1 (exception), -2 (Python decides). */
static int
fields_signature(const KeyedStates *keyed, PyObject *fields, PyObject *body, int with_unique, int *unique_seen,
                 char *text)
{
    Field sorted[SORTED_KEYS_MAX];
    Py_ssize_t count = sorted_fields(fields, sorted, with_unique, unique_seen);
    if (count < 0) {
        return (int)count;
    }
    KeyedStates states = *keyed;
    for (Py_ssize_t i = 0; i < count; i++) {
        SHA1_Update(&states.inner, sorted[i].value, (size_t)sorted[i].value_size);
    }
    if (hash_body(&states.inner, body) < 0) {
        return -1;
    }
    finish(&states.inner, &states.outer, text);
    return 0;
}

static PyObject *
sign(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "sign(states, fields, body) takes 3 arguments");
        return NULL;
    }
    KeyedStates states;
    if (states_from(args[0], &states) < 0) {
        return NULL;
    }
    if (!PyDict_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "fields must be a dict");
        return NULL;
    }
    char text[BASE64_SHA1_CHARS];
    int unique_seen;
    int done = fields_signature(&states, args[1], args[2], 1, &unique_seen, text);
    if (done == -1) {
        return NULL;
    }
    if (done == -2) {
        Py_RETURN_NONE;
    }
    return PyUnicode_FromKindAndData(PyUnicode_1BYTE_KIND, text, BASE64_SHA1_CHARS);
}

/* Constant time in the signature's length: every byte is compared. */
static int
same_text(const char *expected, const char *claimed, Py_ssize_t claimed_size)
{
    unsigned char difference = claimed_size != BASE64_SHA1_CHARS;
    for (Py_ssize_t i = 0; i < BASE64_SHA1_CHARS; i++) {
        difference |= (unsigned char)(expected[i] ^ (i < claimed_size ? claimed[i] : 0));
    }
    return difference == 0;
}

static PyObject *
verify(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "verify(states, fields, body) takes 3 arguments");
        return NULL;
    }
    KeyedStates states;
    if (states_from(args[0], &states) < 0) {
        return NULL;
    }
    PyObject *fields = args[1];
    if (!PyDict_Check(fields)) {
        PyErr_SetString(PyExc_TypeError, "fields must be a dict");
        return NULL;
    }
    PyObject *claimed = PyDict_GetItemString(fields, "Signature"); /* borrowed */
    if (claimed == NULL || !PyUnicode_Check(claimed) || !PyUnicode_IS_ASCII(claimed)) {
        Py_RETURN_NONE;
    }
    const char *claimed_text = (const char *)PyUnicode_DATA(claimed);
    Py_ssize_t claimed_size = PyUnicode_GET_LENGTH(claimed);
    char text[BASE64_SHA1_CHARS];
    int unique_seen;
    int done = fields_signature(&states, fields, args[2], 0, &unique_seen, text);
    if (done == -1) {
        return NULL;
    }
    if (done == -2) {
        Py_RETURN_NONE;
    }
    if (same_text(text, claimed_text, claimed_size)) {
        Py_RETURN_TRUE;
    }
    if (!unique_seen) {
        Py_RETURN_FALSE;
    }
    done = fields_signature(&states, fields, args[2], 1, &unique_seen, text);
    if (done == -1) {
        return NULL;
    }
    if (done == -2) {
        Py_RETURN_NONE;
    }
    return PyBool_FromLong(same_text(text, claimed_text, claimed_size));
}

static PyMethodDef methods[] = {
    {"keyed_states", keyed_states, METH_O, "SHA-1 states after an HMAC key's inner and outer pads."},
    {"signature", (PyCFunction)(void (*)(void))signature, METH_FASTCALL,
     "Base64 HMAC-SHA1 over the values of keys in fields, then body (None: not UTF-8 encodable)."},
    {"sign", (PyCFunction)(void (*)(void))sign, METH_FASTCALL,
     "signature over every key but Signature in TreeMap order (None: the Python path decides)."},
    {"verify", (PyCFunction)(void (*)(void))verify, METH_FASTCALL,
     "Whether fields' Signature is theirs, as the broker checks it (None: the Python path decides)."},
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
