/* The remoting JSON header read in C (optional; shoal.protocol.framing keeps the Python reader,
 * the reference, which takes every header this one declines; tests/protocol/test_wire_speedups.py
 * holds the two to the same answers).
 *
 * decode_json_header(header) -> (code, language, version, opaque, flag, remark, ext_fields) | None
 *     The fields of a header in the form clients write: a JSON object with the bean's keys,
 *     integers for code/version/opaque/flag, a string (or null) for language and remark, and an
 *     extFields object of strings (integers and booleans kept as their text, nulls dropped).
 *     language is the name as sent (str) or None. Anything else (a number where a string belongs
 *     or the reverse, a float, a nested value, fastjson's quirks, a lone surrogate escape, text
 *     that is not UTF-8, a number out of range, too many fields) answers None, and the Python
 *     reader then decides, with its precise error where there is one.
 *
 * plain_send(ext_fields, cluster, refused) -> (topic, queue_id, sys_flag, flag, born, reconsume, stored, wait) | None
 *     The fields of a SEND_MESSAGE_V2 of the plain kind, read in one call: shoal.protocol.send_frames
 *     keeps the Python twin (`python_plain_send`), which documents each check; the same tests hold
 *     both to the same answers. `stored` is None when the property string is not in the usual form
 *     (the caller then cuts it the general way).
 *
 * send_ok_frame(host_hex, commitlog_offset, queue_id, queue_offset, quoted_region, trace_on, opaque,
 *               language, version) -> bytes
 *     A successful single send's whole response frame, its msgId the offset id made of the store
 *     host's hex and the offset: send_frames.send_ok_frame's bytes (the Python twin, held to it).
 *
 * encode_json_header(code, ext_fields: dict, flag, language: str, opaque, remark: str | None, version)
 *         -> bytes | None
 *     framing.python_encode_json_header's bytes: the compact header, fields alphabetical, strings
 *     escaped as json.encoder.encode_basestring escapes them. None when a key or value is not a
 *     str or not encodable as UTF-8 (the Python writer then names the problem); the caller checks
 *     the integer fields' ranges and the number of fields first.
 *
 * Why C: the header is parsed for every request; json.loads plus the field checks around it were
 * a sixth of the broker's event-loop time per send. Every read below is bounds-checked against
 * the end of the buffer.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>

#define EXT_FIELDS_MAX_COUNT 1024 /* protocol/limits.py */
#define INT_DIGITS_MAX 10

typedef struct {
    const unsigned char *p;
    const unsigned char *end;
} Reader;

static void skip_ws(Reader *r)
{
    while (r->p < r->end && (*r->p == ' ' || *r->p == '\t' || *r->p == '\n' || *r->p == '\r')) {
        r->p++;
    }
}

static int hex4(const unsigned char *p, unsigned int *out)
{
    unsigned int v = 0;
    for (int i = 0; i < 4; i++) {
        unsigned char c = p[i];
        v <<= 4;
        if (c >= '0' && c <= '9') v |= (unsigned int)(c - '0');
        else if (c >= 'a' && c <= 'f') v |= (unsigned int)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') v |= (unsigned int)(c - 'A' + 10);
        else return -1;
    }
    *out = v;
    return 0;
}

/* Short ASCII strings seen before (a header's field names, and values such as "false", "0" or a
 * group or topic name, repeat from one request to the next): one str each instead of a new one
 * per request. A direct-mapped table; a miss replaces the slot. Numbers longer than
 * STRING_CACHE_DIGITS_MAX (timestamps, offsets) change every request and are not kept. */
#define STRING_CACHE_SLOTS 128
#define STRING_CACHE_BYTES_MAX 24
#define STRING_CACHE_DIGITS_MAX 4
static PyObject *string_cache[STRING_CACHE_SLOTS];

static PyObject *cached_ascii(const unsigned char *start, Py_ssize_t length)
{
    uint32_t hash = 2166136261u;
    int digits = 1;
    for (Py_ssize_t i = 0; i < length; i++) {
        hash = (hash ^ start[i]) * 16777619u;
        digits &= start[i] >= '0' && start[i] <= '9';
    }
    PyObject **slot = &string_cache[(hash ^ (uint32_t)length) % STRING_CACHE_SLOTS];
    PyObject *cached = *slot;
    if (cached != NULL && PyUnicode_GET_LENGTH(cached) == length
        && memcmp(PyUnicode_1BYTE_DATA(cached), start, (size_t)length) == 0) {
        Py_INCREF(cached);
        return cached;
    }
    PyObject *text = PyUnicode_DecodeASCII((const char *)start, length, "strict");
    if (text != NULL && !(digits && length > STRING_CACHE_DIGITS_MAX)) {
        Py_INCREF(text);
        Py_XSETREF(*slot, text);
    }
    return text;
}

/* A JSON string at r->p (the opening quote) as a new str; NULL without an exception set when it
 * is not one this reader takes (the caller answers None); NULL with one set on memory errors. */
static PyObject *read_string(Reader *r)
{
    if (r->p >= r->end || *r->p != '"') return NULL;
    const unsigned char *start = ++r->p;
    const unsigned char *q = start;
    int escaped = 0;
    unsigned char high = 0;
    while (q < r->end && *q != '"') {
        if (*q < 0x20) return NULL;
        high |= *q;
        if (*q == '\\') {
            escaped = 1;
            if (q + 1 >= r->end) return NULL;
            q += 2;
            continue;
        }
        q++;
    }
    if (q >= r->end) return NULL;
    r->p = q + 1;
    Py_ssize_t raw_len = q - start;
    PyObject *text;
    if (!escaped && high < 0x80 && raw_len <= STRING_CACHE_BYTES_MAX) {
        text = cached_ascii(start, raw_len);
    } else if (!escaped) {
        text = PyUnicode_DecodeUTF8((const char *)start, raw_len, "strict");
    } else {
        /* Unescaped into UTF-8 (never longer than the escaped form), then decoded once. */
        unsigned char *buf = PyMem_Malloc((size_t)raw_len + 1);
        if (buf == NULL) return PyErr_NoMemory();
        unsigned char *o = buf;
        const unsigned char *s = start;
        while (s < q) {
            if (*s != '\\') {
                *o++ = *s++;
                continue;
            }
            unsigned char c = s[1];
            s += 2;
            switch (c) {
            case '"': *o++ = '"'; break;
            case '\\': *o++ = '\\'; break;
            case '/': *o++ = '/'; break;
            case 'b': *o++ = '\b'; break;
            case 'f': *o++ = '\f'; break;
            case 'n': *o++ = '\n'; break;
            case 'r': *o++ = '\r'; break;
            case 't': *o++ = '\t'; break;
            case 'u': {
                unsigned int cp;
                if (q - s < 4 || hex4(s, &cp) < 0) goto refuse;
                s += 4;
                if (cp >= 0xD800 && cp <= 0xDBFF) {
                    unsigned int low;
                    if (q - s < 6 || s[0] != '\\' || s[1] != 'u' || hex4(s + 2, &low) < 0 || low < 0xDC00
                        || low > 0xDFFF) {
                        goto refuse; /* a lone high surrogate */
                    }
                    s += 6;
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
                } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
                    goto refuse; /* a lone low surrogate */
                }
                if (cp < 0x80) {
                    *o++ = (unsigned char)cp;
                } else if (cp < 0x800) {
                    *o++ = (unsigned char)(0xC0 | (cp >> 6));
                    *o++ = (unsigned char)(0x80 | (cp & 0x3F));
                } else if (cp < 0x10000) {
                    *o++ = (unsigned char)(0xE0 | (cp >> 12));
                    *o++ = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
                    *o++ = (unsigned char)(0x80 | (cp & 0x3F));
                } else {
                    *o++ = (unsigned char)(0xF0 | (cp >> 18));
                    *o++ = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
                    *o++ = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
                    *o++ = (unsigned char)(0x80 | (cp & 0x3F));
                }
                break;
            }
            default:
                goto refuse;
            }
        }
        text = PyUnicode_DecodeUTF8((const char *)buf, o - buf, "strict");
        PyMem_Free(buf);
        goto decoded;
    refuse:
        PyMem_Free(buf);
        return NULL;
    }
decoded:
    if (text == NULL && PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
        PyErr_Clear(); /* not UTF-8: the Python reader names it */
    }
    return text;
}

/* A JSON integer literal's extent at r->p: 1 and its bounds when it is one of at most
 * INT_DIGITS_MAX digits (optional minus, no leading zero, no fraction or exponent), else 0. */
static int scan_int(Reader *r, const unsigned char **from, Py_ssize_t *len)
{
    const unsigned char *s = r->p, *q = r->p;
    if (q < r->end && *q == '-') q++;
    const unsigned char *digits = q;
    while (q < r->end && *q >= '0' && *q <= '9') q++;
    Py_ssize_t count = q - digits;
    if (count == 0 || count > INT_DIGITS_MAX || (count > 1 && *digits == '0')) return 0;
    if (q < r->end && (*q == '.' || *q == 'e' || *q == 'E')) return 0;
    *from = s;
    *len = q - s;
    r->p = q;
    return 1;
}

/* A Java int field: an integer literal in int range, or null (0, Java's bean default). */
static int read_int_field(Reader *r, long *out)
{
    if (r->end - r->p >= 4 && memcmp(r->p, "null", 4) == 0) {
        r->p += 4;
        *out = 0;
        return 1;
    }
    const unsigned char *from;
    Py_ssize_t len;
    if (!scan_int(r, &from, &len)) return 0;
    long long v = 0;
    int negative = *from == '-';
    for (const unsigned char *d = from + negative; d < from + len; d++) v = v * 10 + (*d - '0');
    if (negative) v = -v;
    if (v < -2147483648LL || v > 2147483647LL) return 0;
    *out = (long)v;
    return 1;
}

static int literal(Reader *r, const char *word)
{
    size_t n = strlen(word);
    if ((size_t)(r->end - r->p) >= n && memcmp(r->p, word, n) == 0) {
        r->p += n;
        return 1;
    }
    return 0;
}

/* Skip a scalar (string, integer, true, false, null) of a key this reader does not use. */
static int skip_scalar(Reader *r)
{
    if (r->p >= r->end) return 0;
    if (*r->p == '"') {
        PyObject *s = read_string(r);
        if (s == NULL) return 0;
        Py_DECREF(s);
        return 1;
    }
    const unsigned char *from;
    Py_ssize_t len;
    return literal(r, "true") || literal(r, "false") || literal(r, "null") || scan_int(r, &from, &len);
}

/* extFields: an object of strings; integers and booleans become their text, nulls are dropped.
 * Returns 1 with *out set (a new dict), 0 to refuse, -1 on an exception. */
static int read_ext_fields(Reader *r, PyObject **out)
{
    if (literal(r, "null")) {
        *out = PyDict_New();
        return *out ? 1 : -1;
    }
    if (r->p >= r->end || *r->p != '{') return 0;
    r->p++;
    PyObject *fields = PyDict_New();
    if (fields == NULL) return -1;
    skip_ws(r);
    if (r->p < r->end && *r->p == '}') {
        r->p++;
        *out = fields;
        return 1;
    }
    for (;;) {
        skip_ws(r);
        PyObject *key = read_string(r);
        if (key == NULL) goto fail;
        skip_ws(r);
        if (r->p >= r->end || *r->p != ':') {
            Py_DECREF(key);
            goto refuse;
        }
        r->p++;
        skip_ws(r);
        PyObject *value = NULL;
        if (r->p < r->end && *r->p == '"') {
            value = read_string(r);
        } else if (literal(r, "true")) {
            value = PyUnicode_FromString("true");
        } else if (literal(r, "false")) {
            value = PyUnicode_FromString("false");
        } else if (literal(r, "null")) {
            value = Py_None;
            Py_INCREF(value);
        } else {
            const unsigned char *from;
            Py_ssize_t len;
            if (scan_int(r, &from, &len) && !(len == 2 && from[0] == '-' && from[1] == '0')) {
                value = PyUnicode_DecodeASCII((const char *)from, len, "strict");
            }
        }
        if (value == NULL) {
            Py_DECREF(key);
            goto fail;
        }
        int status = 0;
        if (value == Py_None) {
            status = PyDict_DelItem(fields, key) < 0 ? (PyErr_Clear(), 0) : 0; /* a later null drops it too */
        } else {
            status = PyDict_SetItem(fields, key, value);
        }
        Py_DECREF(key);
        Py_DECREF(value);
        if (status < 0) goto error;
        if (PyDict_GET_SIZE(fields) > EXT_FIELDS_MAX_COUNT) goto refuse;
        skip_ws(r);
        if (r->p < r->end && *r->p == ',') {
            r->p++;
            continue;
        }
        if (r->p < r->end && *r->p == '}') {
            r->p++;
            *out = fields;
            return 1;
        }
        goto refuse;
    }
fail:
    if (PyErr_Occurred()) goto error;
refuse:
    Py_DECREF(fields);
    return 0;
error:
    Py_DECREF(fields);
    return -1;
}

/* The fields of a JSON header of `len` bytes at `buf` (code, language, version, opaque, flag,
   remark, extFields), Py_None for a form the Python reader must judge, NULL with an exception. */
static PyObject *
header_fields(const unsigned char *buf, Py_ssize_t len)
{
    Reader r = {buf, buf + len};
    long code = 0, version = 0, opaque = 0, flag = 0;
    int has_code = 0;
    PyObject *language = NULL, *remark = NULL, *ext_fields = NULL, *result = NULL;

    skip_ws(&r);
    if (r.p >= r.end || *r.p != '{') goto refuse;
    r.p++;
    skip_ws(&r);
    if (r.p < r.end && *r.p == '}') {
        r.p++;
    } else {
        for (;;) {
            skip_ws(&r);
            if (r.p >= r.end || *r.p != '"') goto refuse;
            /* The bean's keys are plain ASCII: compare them in place. */
            const unsigned char *key = r.p + 1, *q = key;
            while (q < r.end && *q != '"' && *q != '\\' && *q >= 0x20 && *q < 0x80) q++;
            if (q >= r.end || *q != '"') goto refuse;
            size_t key_len = (size_t)(q - key);
            r.p = q + 1;
            skip_ws(&r);
            if (r.p >= r.end || *r.p != ':') goto refuse;
            r.p++;
            skip_ws(&r);
#define KEY_IS(name) (key_len == sizeof(name) - 1 && memcmp(key, name, key_len) == 0)
            if (KEY_IS("code")) {
                if (!read_int_field(&r, &code)) goto refuse;
                has_code = 1;
            } else if (KEY_IS("version")) {
                if (!read_int_field(&r, &version)) goto refuse;
            } else if (KEY_IS("opaque")) {
                if (!read_int_field(&r, &opaque)) goto refuse;
            } else if (KEY_IS("flag")) {
                if (!read_int_field(&r, &flag)) goto refuse;
            } else if (KEY_IS("language") || KEY_IS("remark")) {
                PyObject **slot = KEY_IS("language") ? &language : &remark;
                PyObject *value;
                if (literal(&r, "null")) {
                    value = NULL;
                } else {
                    value = read_string(&r);
                    if (value == NULL) goto fail;
                }
                Py_XSETREF(*slot, value);
            } else if (KEY_IS("extFields")) {
                PyObject *fields = NULL;
                int status = read_ext_fields(&r, &fields);
                if (status < 0) goto error;
                if (status == 0) goto refuse;
                Py_XSETREF(ext_fields, fields);
            } else {
                if (!skip_scalar(&r)) goto fail;
            }
#undef KEY_IS
            skip_ws(&r);
            if (r.p < r.end && *r.p == ',') {
                r.p++;
                continue;
            }
            if (r.p < r.end && *r.p == '}') {
                r.p++;
                break;
            }
            goto refuse;
        }
    }
    skip_ws(&r);
    if (r.p != r.end || !has_code) goto refuse;
    if (ext_fields == NULL && (ext_fields = PyDict_New()) == NULL) goto error;
    result = Py_BuildValue(
        "(lOlllOO)", code, language ? language : Py_None, version, opaque, flag, remark ? remark : Py_None, ext_fields);
    goto done;
fail:
    if (PyErr_Occurred()) goto error;
refuse:
    result = Py_None;
    Py_INCREF(result);
    goto done;
error:
    result = NULL;
done:
    Py_XDECREF(language);
    Py_XDECREF(remark);
    Py_XDECREF(ext_fields);
    return result;
}

static PyObject *
decode_json_header(PyObject *module, PyObject *arg)
{
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) return NULL;
    PyObject *result = header_fields((const unsigned char *)view.buf, view.len);
    PyBuffer_Release(&view);
    return result;
}


/* --- whole frames (framing.FrameDecoder._decode_run and _decode_payload are the reference) --- */

#define LENGTH_FIELD_SIZE 4
#define SERIALIZE_JSON 0
#define HEADER_LENGTH_MASK 0xFFFFFF

static uint32_t
big_endian_u32(const unsigned char *at)
{
    return ((uint32_t)at[0] << 24) | ((uint32_t)at[1] << 16) | ((uint32_t)at[2] << 8) | (uint32_t)at[3];
}

/* decode_frames(data, view, position, commands, make, languages, java, other, json, frame_max,
   header_max, remark_chars_max) -> position: appends to `commands` a `make(...)` (a
   RemotingCommand, its body a slice of `view`) for each whole frame from `position` on that the
   Python path would decode the same way without a question: a legal length, the JSON form the
   header reader above takes, a remark short enough to need no size check. Stops at the first
   frame that is incomplete or is not one of those, and returns where it starts (the Python path
   then decodes it, or names what is wrong with it). */
static PyObject *
decode_frames(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 12) {
        PyErr_SetString(PyExc_TypeError, "decode_frames takes 12 arguments");
        return NULL;
    }
    PyObject *data = args[0], *view = args[1], *commands = args[3], *make = args[4];
    PyObject *languages = args[5], *java = args[6], *other = args[7], *json = args[8];
    if (!PyBytes_CheckExact(data) || !PyList_CheckExact(commands) || !PyDict_CheckExact(languages)) {
        PyErr_SetString(PyExc_TypeError, "decode_frames: data must be bytes, commands a list, languages a dict");
        return NULL;
    }
    Py_ssize_t position = PyLong_AsSsize_t(args[2]);
    long long frame_max = PyLong_AsLongLong(args[9]);
    long long header_max = PyLong_AsLongLong(args[10]);
    Py_ssize_t remark_max = PyLong_AsSsize_t(args[11]);
    if (PyErr_Occurred()) return NULL;
    const unsigned char *buf = (const unsigned char *)PyBytes_AS_STRING(data);
    Py_ssize_t size = PyBytes_GET_SIZE(data);
    if (position < 0 || position > size) {
        PyErr_SetString(PyExc_ValueError, "decode_frames: position outside the data");
        return NULL;
    }
    while (size - position >= LENGTH_FIELD_SIZE) {
        long long frame_length = (int32_t)big_endian_u32(buf + position);
        if (frame_length < LENGTH_FIELD_SIZE || LENGTH_FIELD_SIZE + frame_length > frame_max) break;
        if (frame_length > size - position - LENGTH_FIELD_SIZE) break; /* incomplete */
        const unsigned char *payload = buf + position + LENGTH_FIELD_SIZE;
        uint32_t word = big_endian_u32(payload);
        long long header_size = word & HEADER_LENGTH_MASK;
        if ((word >> 24) != SERIALIZE_JSON || header_size > frame_length - LENGTH_FIELD_SIZE
            || header_size > header_max)
            break;
        PyObject *fields = header_fields(payload + LENGTH_FIELD_SIZE, (Py_ssize_t)header_size);
        if (fields == NULL) return NULL;
        if (fields == Py_None) {
            Py_DECREF(fields);
            break;
        }
        PyObject *language = PyTuple_GET_ITEM(fields, 1), *remark = PyTuple_GET_ITEM(fields, 5);
        if (remark != Py_None && PyUnicode_GET_LENGTH(remark) > remark_max) {
            Py_DECREF(fields);
            break;
        }
        PyObject *code_of_language = java;
        if (language != Py_None) {
            code_of_language = PyDict_GetItemWithError(languages, language); /* borrowed */
            if (code_of_language == NULL) {
                if (PyErr_Occurred()) {
                    Py_DECREF(fields);
                    return NULL;
                }
                code_of_language = other;
            }
        }
        Py_ssize_t header_end = LENGTH_FIELD_SIZE + (Py_ssize_t)header_size;
        PyObject *body = Py_None;
        Py_INCREF(body);
        if (header_end < frame_length) {
            Py_ssize_t start = position + LENGTH_FIELD_SIZE;
            Py_SETREF(body, PySequence_GetSlice(view, start + header_end, start + (Py_ssize_t)frame_length));
            if (body == NULL) {
                Py_DECREF(fields);
                return NULL;
            }
        }
        PyObject *call[9] = {
            PyTuple_GET_ITEM(fields, 0), code_of_language, PyTuple_GET_ITEM(fields, 2),
            PyTuple_GET_ITEM(fields, 3), PyTuple_GET_ITEM(fields, 4), remark,
            PyTuple_GET_ITEM(fields, 6), body, json,
        };
        PyObject *command = PyObject_Vectorcall(make, call, 9, NULL);
        Py_DECREF(body);
        Py_DECREF(fields);
        if (command == NULL) return NULL;
        int appended = PyList_Append(commands, command);
        Py_DECREF(command);
        if (appended < 0) return NULL;
        position += LENGTH_FIELD_SIZE + (Py_ssize_t)frame_length;
    }
    return PyLong_FromSsize_t(position);
}


/* --- the plain send's fields (send_frames.python_plain_send is the reference) --- */

#define LANE_INT_DIGITS_MAX 9   /* send_frames._INT_DIGITS_MAX_COUNT */
#define LANE_LONG_DIGITS_MAX 18 /* send_frames._LONG_DIGITS_MAX_COUNT */
#define NAME_VALUE_SEPARATOR '\x01'
#define PROPERTY_SEPARATOR '\x02'

static PyObject *key_a, *key_b, *key_c, *key_d, *key_e, *key_f, *key_g, *key_h, *key_i, *key_j, *key_m;

/* ext_fields[key] when it is a str; NULL when absent (*present = 0) or not a str (*present = 1).
 * A lookup error is cleared: the caller refuses and the Python reader decides. */
static PyObject *ext_get(PyObject *ext, PyObject *key, int *present)
{
    PyObject *value = PyDict_GetItemWithError(ext, key);
    if (value == NULL) {
        PyErr_Clear();
        *present = 0;
        return NULL;
    }
    *present = 1;
    return PyUnicode_Check(value) ? value : NULL;
}

/* A plain ASCII decimal of 1..max_digits digits, as lane_int / lane_long take it; -1 otherwise. */
static long long lane_number(PyObject *text, Py_ssize_t max_digits)
{
    if (text == NULL || !PyUnicode_IS_ASCII(text)) return -1;
    Py_ssize_t length = PyUnicode_GET_LENGTH(text);
    if (length < 1 || length > max_digits) return -1;
    const unsigned char *digits = PyUnicode_1BYTE_DATA(text);
    long long value = 0;
    for (Py_ssize_t i = 0; i < length; i++) {
        if (digits[i] < '0' || digits[i] > '9') return -1;
        value = value * 10 + (digits[i] - '0');
    }
    return value;
}

/* The first `needle` in text[from:], or -1. */
static Py_ssize_t find_bytes(const char *text, Py_ssize_t length, Py_ssize_t from, const char *needle, Py_ssize_t size)
{
    if (size == 0) return from <= length ? from : -1;
    for (Py_ssize_t at = from; at + size <= length; at++) {
        const char *hit = memchr(text + at, needle[0], (size_t)(length - size - at + 1));
        if (hit == NULL) return -1;
        at = hit - text;
        if (memcmp(hit, needle, (size_t)size) == 0) return at;
    }
    return -1;
}

static PyObject *
plain_send(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3 || !PyDict_Check(args[0]) || !PyUnicode_Check(args[1]) || !PyTuple_Check(args[2])) {
        PyErr_SetString(PyExc_TypeError, "plain_send(ext_fields: dict, cluster: str, refused: tuple[str, ...])");
        return NULL;
    }
    PyObject *ext = args[0], *refused = args[2];
    int present;
    PyObject *topic = ext_get(ext, key_b, &present);
    if (topic == NULL) Py_RETURN_NONE;
    long long queue_id = lane_number(ext_get(ext, key_e, &present), LANE_INT_DIGITS_MAX);
    long long sys_flag = lane_number(ext_get(ext, key_f, &present), LANE_INT_DIGITS_MAX);
    long long flag = lane_number(ext_get(ext, key_h, &present), LANE_INT_DIGITS_MAX);
    long long born = lane_number(ext_get(ext, key_g, &present), LANE_LONG_DIGITS_MAX);
    if (queue_id < 0 || sys_flag < 0 || flag < 0 || born < 0) Py_RETURN_NONE;
    long long reconsume = 0;
    PyObject *reconsume_text = ext_get(ext, key_j, &present);
    if (present && (reconsume = lane_number(reconsume_text, LANE_INT_DIGITS_MAX)) < 0) Py_RETURN_NONE;
    PyObject *batch = ext_get(ext, key_m, &present);
    if (present && (batch == NULL || PyUnicode_CompareWithASCIIString(batch, "false") != 0)) Py_RETURN_NONE;
    ext_get(ext, key_a, &present);
    if (!present) Py_RETURN_NONE;
    ext_get(ext, key_c, &present);
    if (!present) Py_RETURN_NONE;
    if (lane_number(ext_get(ext, key_d, &present), LANE_INT_DIGITS_MAX) < 0) Py_RETURN_NONE;

    PyObject *properties = ext_get(ext, key_i, &present);
    if (present && properties == NULL) Py_RETURN_NONE; /* not a str: the general reader decides */
    Py_ssize_t length = 0, cluster_length;
    const char *text = "";
    if (properties != NULL && (text = PyUnicode_AsUTF8AndSize(properties, &length)) == NULL) {
        PyErr_Clear(); /* not encodable (a lone surrogate): the general path decides */
        Py_RETURN_NONE;
    }
    const char *cluster = PyUnicode_AsUTF8AndSize(args[1], &cluster_length);
    if (cluster == NULL) return NULL;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(refused); i++) {
        Py_ssize_t marker_length;
        PyObject *item = PyTuple_GET_ITEM(refused, i);
        const char *marker = PyUnicode_Check(item) ? PyUnicode_AsUTF8AndSize(item, &marker_length) : NULL;
        if (marker == NULL) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "refused markers must be str");
            return NULL;
        }
        if (find_bytes(text, length, 0, marker, marker_length) >= 0) Py_RETURN_NONE;
    }

    /* The property string as stored: the usual form cut here, any other left to the caller. */
    static const char wait_marker[] = "WAIT\x01", cluster_marker[] = "CLUSTER\x01", empty_segment[] = "\x02\x02";
    const Py_ssize_t wait_length = sizeof(wait_marker) - 1, cluster_marker_length = sizeof(cluster_marker) - 1;
    Py_ssize_t at = find_bytes(text, length, 0, wait_marker, wait_length);
    PyObject *stored = NULL;
    int wait = 1;
    if (at >= 0 && (at == 0 || text[at - 1] == PROPERTY_SEPARATOR)
        && find_bytes(text, length, at + 1, wait_marker, wait_length) < 0
        && find_bytes(text, length, 0, cluster_marker, cluster_marker_length) < 0
        && find_bytes(text, length, 0, empty_segment, 2) < 0 && !(length > 0 && text[0] == PROPERTY_SEPARATOR)) {
        Py_ssize_t end = find_bytes(text, length, at, "\x02", 1);
        Py_ssize_t value_at = at + wait_length, value_end = end < 0 ? length : end;
        Py_ssize_t tail_at = end < 0 ? length : end + 1;
        Py_ssize_t value_length = value_end - value_at;
        wait = !(value_length == 5 && strncasecmp(text + value_at, "false", 5) == 0);
        /* rest = text[:at] + text[tail_at:], without one trailing separator */
        Py_ssize_t head = at, tail = length - tail_at;
        if (tail > 0) {
            if (text[length - 1] == PROPERTY_SEPARATOR) tail--;
        } else if (head > 0 && text[head - 1] == PROPERTY_SEPARATOR) {
            head--;
        }
        Py_ssize_t rest = head + tail;
        Py_ssize_t size = rest + (rest ? 1 : 0) + cluster_marker_length + cluster_length;
        stored = PyBytes_FromStringAndSize(NULL, size);
        if (stored == NULL) return NULL;
        char *out = PyBytes_AS_STRING(stored);
        memcpy(out, text, (size_t)head);
        out += head;
        memcpy(out, text + tail_at, (size_t)tail);
        out += tail;
        if (rest) *out++ = PROPERTY_SEPARATOR;
        memcpy(out, cluster_marker, (size_t)cluster_marker_length);
        memcpy(out + cluster_marker_length, cluster, (size_t)cluster_length);
    } else {
        stored = Py_None;
        Py_INCREF(stored);
    }
    return Py_BuildValue("(OLLLLLNO)", topic, queue_id, sys_flag, flag, born, reconsume, stored, wait ? Py_True : Py_False);
}

/* --- a single send's success frame (send_frames.send_ok_frame is the reference) --- */

#define SEND_OK_TEXT_MAX_BYTES 256   /* host hex, quoted region, language: each far shorter */
#define SEND_OK_HEADER_MAX_BYTES 1024 /* the template's ~200 bytes, three texts and five numbers */

/* `value` in decimal at `at` (as %lld); returns the end. */
static char *put_decimal(char *at, long long value)
{
    char digits[24];
    int count = 0;
    unsigned long long magnitude = value < 0 ? 0ULL - (unsigned long long)value : (unsigned long long)value;
    do {
        digits[count++] = (char)('0' + magnitude % 10);
        magnitude /= 10;
    } while (magnitude != 0);
    if (value < 0) *at++ = '-';
    while (count > 0) *at++ = digits[--count];
    return at;
}

/* `value` as 16 upper-case hex digits at `at` (as %016llX); returns the end. */
static char *put_hex16(char *at, unsigned long long value)
{
    static const char hex[] = "0123456789ABCDEF";
    for (int i = 15; i >= 0; i--) {
        at[i] = hex[value & 0xF];
        value >>= 4;
    }
    return at + 16;
}

static PyObject *
send_ok_frame(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 9 || !PyUnicode_Check(args[0]) || !PyUnicode_Check(args[4]) || !PyUnicode_Check(args[7])) {
        PyErr_SetString(PyExc_TypeError,
                        "send_ok_frame(host_hex: str, commitlog_offset: int, queue_id: int, queue_offset: int, "
                        "quoted_region: str, trace_on: bool, opaque: int, language: str, version: int)");
        return NULL;
    }
    long long offset = PyLong_AsLongLong(args[1]);
    long long queue_id = PyLong_AsLongLong(args[2]);
    long long queue_offset = PyLong_AsLongLong(args[3]);
    long long opaque = PyLong_AsLongLong(args[6]);
    long long version = PyLong_AsLongLong(args[8]);
    int trace_on = PyObject_IsTrue(args[5]);
    if (PyErr_Occurred() || trace_on < 0) return NULL;
    Py_ssize_t host_length, region_length, language_length;
    const char *host = PyUnicode_AsUTF8AndSize(args[0], &host_length);
    const char *region = host == NULL ? NULL : PyUnicode_AsUTF8AndSize(args[4], &region_length);
    const char *language = region == NULL ? NULL : PyUnicode_AsUTF8AndSize(args[7], &language_length);
    if (language == NULL) return NULL;
    /* Written piece by piece: two snprintf calls (one to size, one to write) cost about a
     * microsecond per answer, most of this function's time. */
    if (host_length > SEND_OK_TEXT_MAX_BYTES || region_length > SEND_OK_TEXT_MAX_BYTES
        || language_length > SEND_OK_TEXT_MAX_BYTES) {
        PyErr_SetString(PyExc_ValueError, "send_ok_frame: header too long");
        return NULL;
    }
    char text[SEND_OK_HEADER_MAX_BYTES];
    char *at = text;
#define PUT_LITERAL(literal) (memcpy(at, literal, sizeof(literal) - 1), at += sizeof(literal) - 1)
#define PUT_TEXT(pointer, length) (memcpy(at, pointer, (size_t)(length)), at += (length))
    PUT_LITERAL("{\"code\":0,\"extFields\":{\"msgId\":\"");
    PUT_TEXT(host, host_length);
    at = put_hex16(at, (unsigned long long)offset);
    PUT_LITERAL("\",\"queueId\":\"");
    at = put_decimal(at, queue_id);
    PUT_LITERAL("\",\"queueOffset\":\"");
    at = put_decimal(at, queue_offset);
    PUT_LITERAL("\",\"MSG_REGION\":");
    PUT_TEXT(region, region_length);
    if (trace_on) {
        PUT_LITERAL(",\"TRACE_ON\":\"true\"},\"flag\":1,\"language\":\"");
    } else {
        PUT_LITERAL(",\"TRACE_ON\":\"false\"},\"flag\":1,\"language\":\"");
    }
    PUT_TEXT(language, language_length);
    PUT_LITERAL("\",\"opaque\":");
    at = put_decimal(at, opaque);
    PUT_LITERAL(",\"serializeTypeCurrentRPC\":\"JSON\",\"version\":");
    at = put_decimal(at, version);
    PUT_LITERAL("}");
#undef PUT_LITERAL
#undef PUT_TEXT
    Py_ssize_t size = at - text;
    PyObject *frame = PyBytes_FromStringAndSize(NULL, 8 + size);
    if (frame == NULL) return NULL;
    unsigned char *out = (unsigned char *)PyBytes_AS_STRING(frame);
    uint32_t total = 4u + (uint32_t)size, word = (uint32_t)size; /* serialize type JSON (0) in the top byte */
    out[0] = (unsigned char)(total >> 24);
    out[1] = (unsigned char)(total >> 16);
    out[2] = (unsigned char)(total >> 8);
    out[3] = (unsigned char)total;
    out[4] = (unsigned char)(word >> 24);
    out[5] = (unsigned char)(word >> 16);
    out[6] = (unsigned char)(word >> 8);
    out[7] = (unsigned char)word;
    memcpy(out + 8, text, (size_t)size);
    return frame;
}

/* --- the JSON header written (framing.python_encode_json_header is the reference) --- */

typedef struct {
    char *data;
    Py_ssize_t length, room;
} Out;

static int out_reserve(Out *out, Py_ssize_t more)
{
    if (out->length + more <= out->room) return 0;
    Py_ssize_t room = out->room * 2;
    if (room < out->length + more) room = out->length + more;
    char *data = PyMem_Realloc(out->data, (size_t)room);
    if (data == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    out->data = data;
    out->room = room;
    return 0;
}

static int out_put(Out *out, const char *text, Py_ssize_t length)
{
    if (out_reserve(out, length) < 0) return -1;
    memcpy(out->data + out->length, text, (size_t)length);
    out->length += length;
    return 0;
}

static int out_decimal(Out *out, long long value)
{
    if (out_reserve(out, 24) < 0) return -1;
    out->length = put_decimal(out->data + out->length, value) - out->data;
    return 0;
}

/* `text` as a JSON string literal, escaped as encode_basestring does (non-ASCII kept as UTF-8);
 * 0 when it is not a str or not encodable (no exception left set), -1 on memory errors. */
static int out_quoted(Out *out, PyObject *text)
{
    if (!PyUnicode_Check(text)) return 0;
    Py_ssize_t length;
    const char *utf8 = PyUnicode_AsUTF8AndSize(text, &length);
    if (utf8 == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_UnicodeEncodeError)) return -1;
        PyErr_Clear();
        return 0;
    }
    if (out_reserve(out, 2 + 6 * length) < 0) return -1; /* every byte escaped as \u00XX at most */
    static const char hex[] = "0123456789abcdef";
    char *at = out->data + out->length;
    *at++ = '"';
    for (Py_ssize_t i = 0; i < length; i++) {
        unsigned char c = (unsigned char)utf8[i];
        if (c >= 0x20 && c != '"' && c != '\\') {
            *at++ = (char)c;
            continue;
        }
        *at++ = '\\';
        switch (c) {
        case '"': *at++ = '"'; break;
        case '\\': *at++ = '\\'; break;
        case '\n': *at++ = 'n'; break;
        case '\r': *at++ = 'r'; break;
        case '\t': *at++ = 't'; break;
        case '\b': *at++ = 'b'; break;
        case '\f': *at++ = 'f'; break;
        default:
            *at++ = 'u';
            *at++ = '0';
            *at++ = '0';
            *at++ = hex[c >> 4];
            *at++ = hex[c & 0xF];
        }
    }
    *at++ = '"';
    out->length = at - out->data;
    return 1;
}

#define PUT(literal) out_put(&out, literal, sizeof(literal) - 1)

static PyObject *
encode_json_header(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 7 || !PyDict_Check(args[1]) || !PyUnicode_Check(args[3]) || (args[5] != Py_None && !PyUnicode_Check(args[5]))) {
        PyErr_SetString(PyExc_TypeError,
                        "encode_json_header(code: int, ext_fields: dict, flag: int, language: str, opaque: int, "
                        "remark: str | None, version: int)");
        return NULL;
    }
    long long code = PyLong_AsLongLong(args[0]), flag = PyLong_AsLongLong(args[2]);
    long long opaque = PyLong_AsLongLong(args[4]), version = PyLong_AsLongLong(args[6]);
    if (PyErr_Occurred()) return NULL;
    Out out = {PyMem_Malloc(512), 0, 512};
    if (out.data == NULL) return PyErr_NoMemory();
    PyObject *result = NULL;
    int status;
    if (PUT("{\"code\":") < 0 || out_decimal(&out, code) < 0 || PUT(",\"extFields\":{") < 0) goto done;
    Py_ssize_t position = 0;
    PyObject *key, *value;
    int first = 1;
    while (PyDict_Next(args[1], &position, &key, &value)) {
        if (!first && PUT(",") < 0) goto done;
        first = 0;
        if ((status = out_quoted(&out, key)) <= 0) goto declined;
        if (PUT(":") < 0) goto done;
        if ((status = out_quoted(&out, value)) <= 0) goto declined;
    }
    if (PUT("},\"flag\":") < 0 || out_decimal(&out, flag) < 0 || PUT(",\"language\":\"") < 0) goto done;
    Py_ssize_t language_length;
    const char *language = PyUnicode_AsUTF8AndSize(args[3], &language_length);
    if (language == NULL || out_put(&out, language, language_length) < 0) goto done;
    if (PUT("\",\"opaque\":") < 0 || out_decimal(&out, opaque) < 0) goto done;
    if (args[5] != Py_None) {
        if (PUT(",\"remark\":") < 0) goto done;
        if ((status = out_quoted(&out, args[5])) <= 0) goto declined;
    }
    if (PUT(",\"serializeTypeCurrentRPC\":\"JSON\",\"version\":") < 0 || out_decimal(&out, version) < 0
        || PUT("}") < 0) {
        goto done;
    }
    result = PyBytes_FromStringAndSize(out.data, out.length);
    goto done;
declined:
    if (status == 0) {
        result = Py_None;
        Py_INCREF(result);
    }
done:
    PyMem_Free(out.data);
    return result;
}

#undef PUT

static PyMethodDef methods[] = {
    {"decode_json_header", decode_json_header, METH_O,
     "The fields of a remoting JSON header in its usual form, or None (then the Python reader decides)."},
    {"decode_frames", (PyCFunction)(void (*)(void))decode_frames, METH_FASTCALL,
     "The commands of the whole frames from a position on that take no question; where it stopped."},
    {"plain_send", (PyCFunction)(void (*)(void))plain_send, METH_FASTCALL,
     "The fields of a plain SEND_MESSAGE_V2 and its stored property string, or None."},
    {"send_ok_frame", (PyCFunction)(void (*)(void))send_ok_frame, METH_FASTCALL,
     "A successful single send's whole response frame (JSON header)."},
    {"encode_json_header", (PyCFunction)(void (*)(void))encode_json_header, METH_FASTCALL,
     "The compact JSON header of a command, or None (then the Python writer decides)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_wire_speedups",
    .m_doc = "The remoting JSON header read in C.",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC
PyInit__wire_speedups(void)
{
    PyObject **keys[] = {&key_a, &key_b, &key_c, &key_d, &key_e, &key_f, &key_g, &key_h, &key_i, &key_j, &key_m};
    const char *names[] = {"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "m"};
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
        if ((*keys[i] = PyUnicode_InternFromString(names[i])) == NULL) return NULL;
    }
    return PyModule_Create(&module);
}
