/* Compiled hot paths of the TJSON <-> strict TBinaryProtocol translation.
 *
 * Same wire contract as the pure-Python modules gateway/thrift/to_tjson.py (binary -> TJSON)
 * and gateway/thrift/to_binary.py + tjson_syntax.py (TJSON -> binary): Apache Thrift's
 * TBinaryProtocol (strict) and TJSONProtocol as Java/C++ write it.
 *
 * - ReplyTranslator: resumable binary REPLY/EXCEPTION -> TJSON. feed() takes socket chunks in
 *   order, keeps only the bytes of the token being read, emits TJSON as values complete and
 *   returns the message length once the message ended. Errors raise ProtocolError.
 * - tjson_call_to_binary: one TJSON CALL/ONEWAY -> binary in one pass, without a value tree.
 *   It returns None ("not handled") for anything it does not translate exactly as the Python
 *   code does (errors, duplicate keys, tolerated non-JSON forms, rare key types); the caller
 *   then runs the Python code, which gives the canonical result or error.
 *
 * Schema ("compiled spec"), built once in gateway/thrift/accel.py: None (unknown), an int
 * (TType, or 18 for IDL binary), a tuple (15|14, elem) for list/set, (13, key, value) for map,
 * a dict {field id: spec} for a struct.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define T_STOP 0
#define T_BOOL 2
#define T_I8 3
#define T_DOUBLE 4
#define T_I16 6
#define T_I32 8
#define T_I64 10
#define T_STRING 11
#define T_STRUCT 12
#define T_MAP 13
#define T_SET 14
#define T_LIST 15
#define T_BINARY 18

#define MAX_DEPTH 64
#define MAX_NAME_BYTES 4096
#define VERSION_1 0x80010000u

static PyObject *ProtocolError;  /* gateway.thrift.errors.ProtocolError */
static PyObject *encode_base64;  /* gateway.thrift.tjson_syntax.encode_base64: bytes -> str */
static PyObject *decode_base64;  /* gateway.thrift.tjson_syntax.decode_base64: str -> bytes */
static double NAN_VALUE, INF_VALUE;

/* ------------------------------------------------------------------ buffers */

typedef struct {
    char *p;
    Py_ssize_t len, cap;
} Buf;

static int buf_grow(Buf *b, Py_ssize_t extra) {
    Py_ssize_t need = b->len + extra, cap = b->cap ? b->cap : 16384;
    while (cap < need) cap *= 2;
    char *q = PyMem_Realloc(b->p, cap);
    if (!q) {
        PyErr_NoMemory();
        return -1;
    }
    b->p = q;
    b->cap = cap;
    return 0;
}

#define RESERVE(b, n) (((b)->len + (n) <= (b)->cap) ? 0 : buf_grow((b), (n)))

static inline int buf_put(Buf *b, const char *s, Py_ssize_t n) {
    if (RESERVE(b, n)) return -1;
    memcpy(b->p + b->len, s, n);
    b->len += n;
    return 0;
}

static inline int buf_putc(Buf *b, char c) {
    if (RESERVE(b, 1)) return -1;
    b->p[b->len++] = c;
    return 0;
}

#define PUTS(b, s) buf_put((b), (s), (Py_ssize_t)(sizeof(s) - 1))

static void buf_free(Buf *b) {
    PyMem_Free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
}

static int put_int(Buf *b, long long v) {
    if (v >= 0 && v < 100) {  /* field ids, small counts */
        if (RESERVE(b, 2)) return -1;
        if (v >= 10) b->p[b->len++] = (char)('0' + v / 10);
        b->p[b->len++] = (char)('0' + v % 10);
        return 0;
    }
    static const char pairs[] =
        "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
        "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
        "8081828384858687888990919293949596979899";
    char tmp[24];
    int i = 24;
    unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
    while (u >= 100) {  /* two digits at a time */
        unsigned r = (unsigned)(u % 100);
        u /= 100;
        i -= 2;
        memcpy(tmp + i, pairs + 2 * r, 2);
    }
    if (u >= 10) {
        i -= 2;
        memcpy(tmp + i, pairs + 2 * u, 2);
    } else {
        tmp[--i] = (char)('0' + u);
    }
    if (v < 0) tmp[--i] = '-';
    return buf_put(b, tmp + i, 24 - i);
}

static inline uint32_t be32(const unsigned char *p) {
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

static inline uint64_t be64(const unsigned char *p) { return ((uint64_t)be32(p) << 32) | be32(p + 4); }

/* ------------------------------------------------------------------ schema */

static const char *tag_of(int t) {
    switch (t) {
    case T_BOOL: return "tf";
    case T_I8: return "i8";
    case T_DOUBLE: return "dbl";
    case T_I16: return "i16";
    case T_I32: return "i32";
    case T_I64: return "i64";
    case T_STRING: return "str";
    case T_STRUCT: return "rec";
    case T_MAP: return "map";
    case T_SET: return "set";
    case T_LIST: return "lst";
    default: return NULL;
    }
}

/* Append the TJSON type tag of t (t must be a known type). */
static inline int put_tag(Buf *b, int t) {
    const char *tag = tag_of(t);
    return buf_put(b, tag, tag[2] ? 3 : 2);
}

static int type_of_tag(const char *s, Py_ssize_t n) {
    static const int types[] = {T_BOOL, T_I8, T_DOUBLE, T_I16, T_I32, T_I64, T_STRING, T_STRUCT, T_MAP, T_SET, T_LIST};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        const char *tag = tag_of(types[i]);
        if ((Py_ssize_t)strlen(tag) == n && memcmp(tag, s, n) == 0) return types[i];
    }
    return -1;
}

/* Smallest encoding of one value (for container count checks), -1 for unknown types. */
static int min_size(int t) {
    switch (t) {
    case T_BOOL: case T_I8: case T_STRUCT: return 1;
    case T_I16: return 2;
    case T_I32: case T_STRING: return 4;
    case T_DOUBLE: case T_I64: return 8;
    case T_LIST: case T_SET: return 5;
    case T_MAP: return 6;
    default: return -1;
    }
}

/* The spec if it describes wire type t (compatible_spec in to_binary.py), else NULL. Borrowed. */
static PyObject *compat(PyObject *spec, int t) {
    if (spec == NULL || spec == Py_None) return NULL;
    if (PyLong_CheckExact(spec)) {
        long s = PyLong_AsLong(spec);
        return (s == t || (s == T_BINARY && t == T_STRING)) ? spec : NULL;
    }
    if (PyTuple_CheckExact(spec)) return PyLong_AsLong(PyTuple_GET_ITEM(spec, 0)) == t ? spec : NULL;
    if (PyDict_CheckExact(spec)) return t == T_STRUCT ? spec : NULL;
    return NULL;
}

static int is_binary(PyObject *spec) { return spec != NULL && PyLong_CheckExact(spec) && PyLong_AsLong(spec) == T_BINARY; }

static PyObject *field_spec(PyObject *struct_spec, int fid, int t) {
    if (struct_spec == NULL) return NULL;
    PyObject *key = PyLong_FromLong(fid);
    if (!key) return NULL;
    PyObject *spec = PyDict_GetItemWithError(struct_spec, key);
    Py_DECREF(key);
    return compat(spec, t);
}

/* ------------------------------------------------------------------ UTF-8 and JSON strings */

/* Length of the valid UTF-8 sequence at p (strict, as Python's decoder), 0 if invalid. */
static int utf8_seq(const unsigned char *p, const unsigned char *end) {
    unsigned c = p[0];
    if (c < 0x80) return 1;
    int n;
    unsigned lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) n = 2;
    else if (c == 0xE0) { n = 3; lo = 0xA0; }
    else if (c == 0xED) { n = 3; hi = 0x9F; }
    else if (c >= 0xE1 && c <= 0xEF) n = 3;
    else if (c == 0xF0) { n = 4; lo = 0x90; }
    else if (c >= 0xF1 && c <= 0xF3) n = 4;
    else if (c == 0xF4) { n = 4; hi = 0x8F; }
    else return 0;
    if (end - p < n) return 0;
    if (p[1] < lo || p[1] > hi) return 0;
    for (int i = 2; i < n; i++)
        if ((p[i] & 0xC0) != 0x80) return 0;
    return n;
}

static int utf8_valid(const unsigned char *p, Py_ssize_t n) {
    const unsigned char *end = p + n;
    while (p < end) {
        if (*p < 0x80) { p++; continue; }
        int k = utf8_seq(p, end);
        if (!k) return 0;
        p += k;
    }
    return 1;
}

/* Append valid UTF-8 as a JSON string literal, escaped as json.encoder.encode_basestring does. */
static int put_json_string_utf8(Buf *b, const unsigned char *s, Py_ssize_t n) {
    static const char hex[] = "0123456789abcdef";
    if (RESERVE(b, n + 2)) return -1;
    b->p[b->len++] = '"';
    Py_ssize_t start = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        unsigned char c = s[i];
        if (c >= 0x20 && c != '"' && c != '\\') continue;
        if (buf_put(b, (const char *)s + start, i - start)) return -1;
        start = i + 1;
        char esc[6] = {'\\', 0, 0, 0, 0, 0};
        int len = 2;
        switch (c) {
        case '"': esc[1] = '"'; break;
        case '\\': esc[1] = '\\'; break;
        case '\n': esc[1] = 'n'; break;
        case '\r': esc[1] = 'r'; break;
        case '\t': esc[1] = 't'; break;
        case '\b': esc[1] = 'b'; break;
        case '\f': esc[1] = 'f'; break;
        default:
            esc[1] = 'u'; esc[2] = '0'; esc[3] = '0'; esc[4] = hex[c >> 4]; esc[5] = hex[c & 15];
            len = 6;
        }
        if (buf_put(b, esc, len)) return -1;
    }
    if (buf_put(b, (const char *)s + start, n - start)) return -1;
    return buf_putc(b, '"');
}

enum { S_PLAIN, S_UTF8, S_INVALID };

/* S_PLAIN: printable ASCII without '"' or '\\' (most strings); S_UTF8: other valid UTF-8;
 * S_INVALID: not UTF-8. */
static inline int string_kind(const unsigned char *s, Py_ssize_t n) {
    Py_ssize_t i = 0;
    /* Eight bytes at a time (bit tricks from "Bit Twiddling Hacks": a byte >= 0x80, a byte
     * < 0x20, a byte equal to '"' or to '\\'), then byte by byte from the first doubtful word. */
    const uint64_t ones = 0x0101010101010101ULL, highs = 0x8080808080808080ULL;
    for (; i + 8 <= n; i += 8) {
        uint64_t x, q, bs;
        memcpy(&x, s + i, 8);
        q = x ^ (ones * '"');
        bs = x ^ (ones * '\\');
        if ((x | ((x - ones * 0x20) & ~x) | ((q - ones) & ~q) | ((bs - ones) & ~bs)) & highs) break;
    }
    while (i < n && s[i] >= 0x20 && s[i] < 0x80 && s[i] != '"' && s[i] != '\\') i++;
    if (i == n) return S_PLAIN;
    return utf8_valid(s + i, n - i) ? S_UTF8 : S_INVALID;
}

static inline int put_plain_string(Buf *b, const unsigned char *s, Py_ssize_t n) {
    if (RESERVE(b, n + 2)) return -1;
    b->p[b->len++] = '"';
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len++] = '"';
    return 0;
}

/* A binary-protocol string as TJSON: bad UTF-8 decoded with U+FFFD replacement (Java's
 * new String(bytes, UTF_8)); IDL binary as padded base64. */
static int put_thrift_string(Buf *b, const unsigned char *s, Py_ssize_t n, int binary) {
    if (binary) {
        PyObject *raw = PyBytes_FromStringAndSize((const char *)s, n);
        if (!raw) return -1;
        PyObject *text = PyObject_CallOneArg(encode_base64, raw);
        Py_DECREF(raw);
        if (!text) return -1;
        Py_ssize_t len;
        const char *ascii = PyUnicode_AsUTF8AndSize(text, &len);
        int rc = ascii ? (buf_putc(b, '"') || buf_put(b, ascii, len) || buf_putc(b, '"')) ? -1 : 0 : -1;
        Py_DECREF(text);
        return rc;
    }
    switch (string_kind(s, n)) {
    case S_PLAIN: return put_plain_string(b, s, n);
    case S_UTF8: return put_json_string_utf8(b, s, n);
    }
    PyObject *text = PyUnicode_DecodeUTF8((const char *)s, n, "replace");
    if (!text) return -1;
    Py_ssize_t len;
    const char *utf8 = PyUnicode_AsUTF8AndSize(text, &len);
    int rc = utf8 ? put_json_string_utf8(b, (const unsigned char *)utf8, len) : -1;
    Py_DECREF(text);
    return rc;
}

static int put_double(Buf *b, double v, int key) {
    if (v != v) return key ? PUTS(b, "\"NaN\"") : PUTS(b, "\"NaN\"");
    if (v == INF_VALUE) return PUTS(b, "\"Infinity\"");
    if (v == -INF_VALUE) return PUTS(b, "\"-Infinity\"");
    char *text = PyOS_double_to_string(v, 'r', 0, Py_DTSF_ADD_DOT_0, NULL);  /* repr(float) */
    if (!text) return -1;
    int rc = (key && buf_putc(b, '"')) || buf_put(b, text, strlen(text)) || (key && buf_putc(b, '"')) ? -1 : 0;
    PyMem_Free(text);
    return rc;
}

/* ================================================================== binary -> TJSON */

enum { F_STRUCT, F_LIST, F_MAP };

typedef struct {
    int kind, t1, t2, first;
    long long remaining;  /* list: elements left; map: keys + values left */
    PyObject *spec, *s1, *s2;  /* borrowed from the compiled schema */
} Frame;

enum { H_START, H_BODY, H_DONE };

/* Field specs already looked up in this reply: (struct spec, field id, wire type) -> spec,
 * direct-mapped. Saves an int object and a dict lookup per field. Borrowed references, kept
 * alive by the compiled schema that `results` holds. */
#define SPEC_CACHE 256
typedef struct {
    PyObject *owner, *spec;
    int fid, t;
} SpecSlot;

typedef struct {
    PyObject_HEAD
    PyObject *results;  /* dict: method name -> compiled result struct spec */
    PyObject *seqid;    /* int replacing the message's seqid, or None */
    Py_ssize_t max_bytes;
    Buf in;             /* unconsumed input: in.p[in_pos:in.len] */
    Py_ssize_t in_pos;
    Py_ssize_t base;    /* stream offset of in.p[0] */
    Buf out;            /* TJSON not yet taken */
    int state, depth, pending, pending_key;
    PyObject *pending_spec;
    Py_ssize_t end;     /* message length once done */
    Frame stack[MAX_DEPTH + 2];
    SpecSlot cache[SPEC_CACHE];
} Translator;

static PyObject *field_spec_cached(Translator *T, PyObject *struct_spec, int fid, int t) {
    if (struct_spec == NULL) return NULL;
    size_t h = ((((uintptr_t)struct_spec >> 4) * 31u) + (size_t)(unsigned)fid * 7u + (size_t)t) & (SPEC_CACHE - 1);
    SpecSlot *slot = &T->cache[h];
    if (slot->owner == struct_spec && slot->fid == fid && slot->t == t) return slot->spec;
    PyObject *spec = field_spec(struct_spec, fid, t);
    if (spec == NULL && PyErr_Occurred()) return NULL;
    slot->owner = struct_spec;
    slot->fid = fid;
    slot->t = t;
    slot->spec = spec;
    return spec;
}

static int fail(const char *reason) {
    PyErr_SetString(ProtocolError, reason);
    return -1;
}

static int read_header(Translator *T) {
    const unsigned char *d = (const unsigned char *)T->in.p + T->in_pos;
    Py_ssize_t avail = T->in.len - T->in_pos;
    if (avail < 8) return 0;
    uint32_t word = be32(d);
    if ((word & 0xFFFF0000u) != VERSION_1) {
        PyObject *reason = PyUnicode_FromFormat("bad binary message version 0x%08x", word);
        if (reason) { PyErr_SetObject(ProtocolError, reason); Py_DECREF(reason); }
        return -1;
    }
    int32_t name_len = (int32_t)be32(d + 4);
    if (name_len < 0 || name_len > MAX_NAME_BYTES) return fail("bad method name length in binary message");
    if (avail < 12 + name_len) return 0;
    int mtype = word & 0xFF;
    PyObject *name = PyUnicode_DecodeUTF8((const char *)d + 8, name_len, NULL);
    if (!name) {
        PyErr_Clear();
        return fail("method name is not UTF-8");
    }
    PyObject *spec = NULL;
    if (mtype == 2) {
        spec = PyDict_GetItemWithError(T->results, name);
        if (!spec && PyErr_Occurred()) { Py_DECREF(name); return -1; }
    } else if (mtype != 3) {
        Py_DECREF(name);
        PyObject *reason = PyUnicode_FromFormat("expected a REPLY or EXCEPTION message, got type %d", mtype);
        if (reason) { PyErr_SetObject(ProtocolError, reason); Py_DECREF(reason); }
        return -1;
    }
    long long seqid = (int32_t)be32(d + 8 + name_len);
    if (T->seqid != Py_None) {
        seqid = PyLong_AsLongLong(T->seqid);
        if (seqid == -1 && PyErr_Occurred()) { Py_DECREF(name); return -1; }
    }
    int rc = PUTS(&T->out, "[1,") || put_json_string_utf8(&T->out, d + 8, name_len) || buf_putc(&T->out, ',') ||
             put_int(&T->out, mtype) || buf_putc(&T->out, ',') || put_int(&T->out, seqid) || buf_putc(&T->out, ',');
    Py_DECREF(name);
    if (rc) return -1;
    T->in_pos += 12 + name_len;
    T->state = H_BODY;
    T->pending = T_STRUCT;
    T->pending_key = 0;
    T->pending_spec = spec;  /* exceptions (TApplicationException) have no binary fields */
    return 1;
}

/* A value just completed: close the field wrapper or put the key separator. */
static inline int after_value(Translator *T) {
    if (T->depth == 0) return 0;
    Frame *f = &T->stack[T->depth - 1];
    if (f->kind == F_STRUCT) return buf_putc(&T->out, '}');
    if (f->kind == F_MAP && (f->remaining & 1)) return buf_putc(&T->out, ':');
    return 0;
}

static int push(Translator *T, int kind) {
    if (T->depth > MAX_DEPTH) return fail("binary message nested too deeply");
    Frame *f = &T->stack[T->depth++];
    memset(f, 0, sizeof *f);
    f->kind = kind;
    f->first = 1;
    return 0;
}

static int check_count(Translator *T, Py_ssize_t pos, long long count, int min) {
    if (min < 0) return fail("unknown binary container element type");
    if (count < 0) return fail("negative container size in binary message");
    if (T->base + pos + count * (long long)min > T->max_bytes) return fail("binary message exceeds size limit");
    return 0;
}

/* Run until the input runs out (0), the message ends (1) or an error (-1). */
static int run(Translator *T) {
    const unsigned char *d = (const unsigned char *)T->in.p;
    Py_ssize_t pos = T->in_pos, end = T->in.len;
    Buf *o = &T->out;
#define NEED(n) do { if (end - pos < (n)) goto more; } while (0)
#define CHECK(x) do { if (x) goto error; } while (0)
    for (;;) {
        if (T->pending >= 0) {
            int t = T->pending, key = T->pending_key;
            PyObject *spec = T->pending_spec;
            switch (t) {
            case T_BOOL:
                NEED(1);
                CHECK(key ? (d[pos] == 1 ? PUTS(o, "\"1\"") : PUTS(o, "\"0\"")) : buf_putc(o, d[pos] == 1 ? '1' : '0'));
                pos += 1;
                break;
            case T_I8: case T_I16: case T_I32: case T_I64: {
                int size = t == T_I8 ? 1 : t == T_I16 ? 2 : t == T_I32 ? 4 : 8;
                NEED(size);
                long long v = t == T_I8 ? (int8_t)d[pos] : t == T_I16 ? (int16_t)((d[pos] << 8) | d[pos + 1])
                            : t == T_I32 ? (int32_t)be32(d + pos) : (int64_t)be64(d + pos);
                CHECK((key && buf_putc(o, '"')) || put_int(o, v) || (key && buf_putc(o, '"')));
                pos += size;
                break;
            }
            case T_DOUBLE: {
                NEED(8);
                double v = PyFloat_Unpack8((const char *)d + pos, 0);
                if (v == -1.0 && PyErr_Occurred()) goto error;
                CHECK(put_double(o, v, key));
                pos += 8;
                break;
            }
            case T_STRING: {
                NEED(4);
                int32_t len = (int32_t)be32(d + pos);
                if (len < 0) { fail("negative string length in binary message"); goto error; }
                if (T->base + pos + 4 + (long long)len > T->max_bytes) { fail("binary message exceeds size limit"); goto error; }
                NEED(4 + (Py_ssize_t)len);
                CHECK(put_thrift_string(o, d + pos + 4, len, is_binary(spec)));
                pos += 4 + len;
                break;
            }
            case T_STRUCT:
                CHECK(push(T, F_STRUCT));
                T->stack[T->depth - 1].spec = PyDict_CheckExact(spec ? spec : Py_None) ? spec : NULL;
                CHECK(buf_putc(o, '{'));
                T->pending = -1;
                continue;
            case T_LIST: case T_SET: {
                NEED(5);
                int et = (int8_t)d[pos];
                long long count = (int32_t)be32(d + pos + 1);
                pos += 5;
                if (!tag_of(et)) { fail("unknown binary container element type"); goto error; }
                CHECK(check_count(T, pos, count, min_size(et)));
                CHECK(push(T, F_LIST));
                Frame *f = &T->stack[T->depth - 1];
                f->t1 = et;
                f->remaining = count;
                f->s1 = spec ? compat(PyTuple_GET_ITEM(spec, 1), et) : NULL;
                CHECK(PUTS(o, "[\"") || put_tag(o, et) || PUTS(o, "\",") || put_int(o, count));
                T->pending = -1;
                continue;
            }
            case T_MAP: {
                NEED(6);
                int kt = (int8_t)d[pos], vt = (int8_t)d[pos + 1];
                long long count = (int32_t)be32(d + pos + 2);
                pos += 6;
                if (!tag_of(kt) || !tag_of(vt)) { fail("unknown binary map key/value type"); goto error; }
                CHECK(check_count(T, pos, count, min_size(kt) + min_size(vt)));
                CHECK(push(T, F_MAP));
                Frame *f = &T->stack[T->depth - 1];
                f->t1 = kt;
                f->t2 = vt;
                f->remaining = 2 * count;
                f->s1 = spec ? compat(PyTuple_GET_ITEM(spec, 1), kt) : NULL;
                f->s2 = spec ? compat(PyTuple_GET_ITEM(spec, 2), vt) : NULL;
                CHECK(PUTS(o, "[\"") || put_tag(o, kt) || PUTS(o, "\",\"") ||
                      put_tag(o, vt) || PUTS(o, "\",") || put_int(o, count) || PUTS(o, ",{"));
                T->pending = -1;
                continue;
            }
            default: {
                PyObject *reason = PyUnicode_FromFormat("unknown binary type %d", t);
                if (reason) { PyErr_SetObject(ProtocolError, reason); Py_DECREF(reason); }
                goto error;
            }
            }
            T->pending = -1;
            CHECK(after_value(T));
            continue;
        }
        if (T->depth == 0) {
            CHECK(buf_putc(o, ']'));
            T->in_pos = pos;
            T->end = T->base + pos;
            T->state = H_DONE;
            if (T->end > T->max_bytes) return fail("binary message exceeds size limit");
            return 1;
        }
        Frame *f = &T->stack[T->depth - 1];
        if (f->kind == F_STRUCT) {
            NEED(1);
            if (d[pos] == T_STOP) {
                pos += 1;
                T->depth--;
                CHECK(buf_putc(o, '}') || after_value(T));
                continue;
            }
            NEED(3);
            int ft = (int8_t)d[pos];
            int fid = (int16_t)((d[pos + 1] << 8) | d[pos + 2]);
            if (!tag_of(ft)) {
                PyObject *reason = PyUnicode_FromFormat("unknown binary type %d in field %d", ft, fid);
                if (reason) { PyErr_SetObject(ProtocolError, reason); Py_DECREF(reason); }
                goto error;
            }
            pos += 3;
            CHECK((!f->first && buf_putc(o, ',')) || buf_putc(o, '"') || put_int(o, fid) || PUTS(o, "\":{\"") ||
                  put_tag(o, ft) || PUTS(o, "\":"));
            f->first = 0;
            T->pending = ft;
            T->pending_key = 0;
            T->pending_spec = field_spec_cached(T, f->spec, fid, ft);
            if (!T->pending_spec && PyErr_Occurred()) goto error;
        } else if (f->kind == F_LIST) {
            if (f->remaining == 0) {
                T->depth--;
                CHECK(buf_putc(o, ']') || after_value(T));
                continue;
            }
            f->remaining--;
            CHECK(buf_putc(o, ','));
            T->pending = f->t1;
            T->pending_key = 0;
            T->pending_spec = f->s1;
        } else {
            if (f->remaining == 0) {
                T->depth--;
                CHECK(PUTS(o, "}]") || after_value(T));
                continue;
            }
            int is_key = (f->remaining & 1) == 0;
            f->remaining--;
            if (is_key) {
                if (!f->first) CHECK(buf_putc(o, ','));
                f->first = 0;
                T->pending = f->t1;
                T->pending_spec = f->s1;
                /* numbers and bools are quoted keys; strings, containers and structs are not */
                T->pending_key = f->t1 != T_STRING && f->t1 != T_STRUCT && f->t1 != T_MAP &&
                                 f->t1 != T_SET && f->t1 != T_LIST;
            } else {
                T->pending = f->t2;
                T->pending_spec = f->s2;
                T->pending_key = 0;
            }
        }
    }
more:
    T->in_pos = pos;
    return 0;
error:
    T->in_pos = pos;
    return -1;
#undef NEED
#undef CHECK
}

static int Translator_init(Translator *T, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"results", "max_bytes", "seqid", NULL};
    PyObject *results, *seqid = Py_None;
    Py_ssize_t max_bytes;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O!n|O", kwlist, &PyDict_Type, &results, &max_bytes, &seqid))
        return -1;
    if (max_bytes <= 0) {
        PyErr_SetString(PyExc_ValueError, "max_bytes must be positive");
        return -1;
    }
    if (seqid != Py_None && !PyLong_Check(seqid)) {
        PyErr_SetString(PyExc_TypeError, "seqid must be an int or None");
        return -1;
    }
    if (T->results) memset(T->cache, 0, sizeof T->cache);  /* re-init; a new object is zeroed */
    Py_INCREF(results);
    Py_XSETREF(T->results, results);
    Py_INCREF(seqid);
    Py_XSETREF(T->seqid, seqid);
    T->max_bytes = max_bytes;
    T->in.len = T->out.len = 0;
    T->in_pos = T->base = 0;
    T->state = H_START;
    T->depth = 0;
    T->pending = -1;
    T->end = -1;
    return 0;
}

static void Translator_dealloc(Translator *T) {
    Py_XDECREF(T->results);
    Py_XDECREF(T->seqid);
    buf_free(&T->in);
    buf_free(&T->out);
    Py_TYPE(T)->tp_free((PyObject *)T);
}

static PyObject *Translator_feed(Translator *T, PyObject *arg) {
    if (T->state == H_DONE) return PyLong_FromSsize_t(T->end);
    if (!T->results) {
        PyErr_SetString(PyExc_RuntimeError, "ReplyTranslator not initialised");
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE)) return NULL;
    int rc;
    if (T->state == H_BODY && T->in_pos == T->in.len) {
        /* Nothing left over from the last chunk: translate straight from the caller's buffer
         * and keep only the unfinished token's bytes. */
        Buf own = T->in;
        T->base += T->in.len;
        T->in.p = view.buf;
        T->in.len = T->in.cap = view.len;
        T->in_pos = 0;
        rc = run(T);
        Py_ssize_t used = T->in_pos;
        T->in = own;
        T->in.len = T->in_pos = 0;
        T->base += used;
        if (rc == 0) rc = buf_put(&T->in, (const char *)view.buf + used, view.len - used);
        PyBuffer_Release(&view);
    } else {
        /* Drop consumed bytes, then append the chunk. */
        if (T->in_pos) {
            memmove(T->in.p, T->in.p + T->in_pos, T->in.len - T->in_pos);
            T->base += T->in_pos;
            T->in.len -= T->in_pos;
            T->in_pos = 0;
        }
        rc = buf_put(&T->in, view.buf, view.len);
        PyBuffer_Release(&view);
        if (rc) return NULL;
        if (T->state == H_START) {
            rc = read_header(T);
            if (rc <= 0) {
                if (rc == 0 && T->base + T->in.len > T->max_bytes) fail("binary message exceeds size limit");
                return rc < 0 || PyErr_Occurred() ? NULL : Py_NewRef(Py_None);
            }
        }
        rc = run(T);
    }
    if (rc < 0) return NULL;
    if (rc == 1) {
        /* Keep nothing but the message length. */
        T->in.len = T->in_pos = 0;
        return PyLong_FromSsize_t(T->end);
    }
    if (T->base + T->in.len > T->max_bytes) {
        fail("binary message exceeds size limit");
        return NULL;
    }
    /* Shrink a buffer that held one large string. */
    if (T->in.cap > (1 << 22) && T->in.len - T->in_pos < (1 << 16)) {
        Py_ssize_t keep = T->in.len - T->in_pos;
        char *q = PyMem_Malloc(keep ? keep : 1);
        if (!q) return PyErr_NoMemory();
        memcpy(q, T->in.p + T->in_pos, keep);
        PyMem_Free(T->in.p);
        T->in.p = q;
        T->in.cap = keep ? keep : 1;
        T->base += T->in_pos;
        T->in.len = keep;
        T->in_pos = 0;
    }
    Py_RETURN_NONE;
}

static PyObject *Translator_take(Translator *T, PyObject *Py_UNUSED(ignored)) {
    PyObject *data = PyBytes_FromStringAndSize(T->out.p ? T->out.p : "", T->out.len);
    if (!data) return NULL;
    T->out.len = 0;
    if (T->out.cap > (1 << 22)) buf_free(&T->out);
    return data;
}

static PyObject *Translator_pending(Translator *T, void *Py_UNUSED(closure)) { return PyLong_FromSsize_t(T->out.len); }

static PyObject *Translator_end(Translator *T, void *Py_UNUSED(closure)) {
    if (T->state != H_DONE) Py_RETURN_NONE;
    return PyLong_FromSsize_t(T->end);
}

static PyMethodDef Translator_methods[] = {
    {"feed", (PyCFunction)Translator_feed, METH_O,
     "feed(chunk) -> int | None: the message length once it is complete, else None. "
     "Raises ProtocolError on a malformed message or one longer than max_bytes."},
    {"take", (PyCFunction)Translator_take, METH_NOARGS, "take() -> bytes: the TJSON produced since the last take()."},
    {NULL},
};

static PyGetSetDef Translator_getset[] = {
    {"pending", (getter)Translator_pending, NULL, "bytes of TJSON waiting for take()", NULL},
    {"end", (getter)Translator_end, NULL, "message length once complete, else None", NULL},
    {NULL},
};

static PyTypeObject TranslatorType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "gateway.thrift._speedups.ReplyTranslator",
    .tp_basicsize = sizeof(Translator),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "ReplyTranslator(results: dict, max_bytes: int, seqid: int | None = None)\n\n"
              "Resumable strict-binary REPLY/EXCEPTION -> compact TJSON (see to_tjson.py).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Translator_init,
    .tp_dealloc = (destructor)Translator_dealloc,
    .tp_methods = Translator_methods,
    .tp_getset = Translator_getset,
};

/* ================================================================== TJSON -> binary */

/* Parser state. Functions return 0 on success, 1 for "not handled here" (the Python code
 * decides), -1 with a Python exception set (memory). */
typedef struct {
    const unsigned char *p, *end;
    Buf out;
    Buf scratch;
} Parser;

#define BAIL 1

static inline void ws(Parser *P) {
    while (P->p < P->end && (*P->p == ' ' || *P->p == '\t' || *P->p == '\n' || *P->p == '\r')) P->p++;
}

static inline int expect(Parser *P, char c) {
    ws(P);
    if (P->p >= P->end || *P->p != (unsigned char)c) return BAIL;
    P->p++;
    return 0;
}

static int hex4(const unsigned char *p, unsigned *v) {
    unsigned r = 0;
    for (int i = 0; i < 4; i++) {
        unsigned c = p[i], d;
        if (c >= '0' && c <= '9') d = c - '0';
        else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
        else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
        else return -1;
        r = r * 16 + d;
    }
    *v = r;
    return 0;
}

/* Decode the JSON string at P->p (at its opening quote) as UTF-8 into b. json.loads with
 * strict=False: raw control characters allowed. Lone surrogates and bad UTF-8: BAIL. */
static int read_string(Parser *P, Buf *b) {
    ws(P);
    if (P->p >= P->end || *P->p != '"') return BAIL;
    const unsigned char *p = P->p + 1, *end = P->end;
    for (;;) {
        const unsigned char *start = p;
        while (p < end && *p != '"' && *p != '\\' && *p < 0x80) p++;
        if (buf_put(b, (const char *)start, p - start)) return -1;
        if (p >= end) return BAIL;
        unsigned char c = *p;
        if (c == '"') {
            P->p = p + 1;
            return 0;
        }
        if (c >= 0x80) {
            int k = utf8_seq(p, end);
            if (!k) return BAIL;
            if (buf_put(b, (const char *)p, k)) return -1;
            p += k;
            continue;
        }
        /* backslash */
        if (end - p < 2) return BAIL;
        char out;
        switch (p[1]) {
        case '"': out = '"'; break;
        case '\\': out = '\\'; break;
        case '/': out = '/'; break;
        case 'b': out = '\b'; break;
        case 'f': out = '\f'; break;
        case 'n': out = '\n'; break;
        case 'r': out = '\r'; break;
        case 't': out = '\t'; break;
        case 'u': {
            unsigned cp, lo;
            if (end - p < 6 || hex4(p + 2, &cp)) return BAIL;
            p += 6;
            if (cp >= 0xDC00 && cp <= 0xDFFF) return BAIL;
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                if (end - p < 6 || p[0] != '\\' || p[1] != 'u' || hex4(p + 2, &lo) || lo < 0xDC00 || lo > 0xDFFF)
                    return BAIL;
                p += 6;
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            }
            char u[4];
            int n;
            if (cp < 0x80) { u[0] = (char)cp; n = 1; }
            else if (cp < 0x800) { u[0] = (char)(0xC0 | (cp >> 6)); u[1] = (char)(0x80 | (cp & 63)); n = 2; }
            else if (cp < 0x10000) {
                u[0] = (char)(0xE0 | (cp >> 12)); u[1] = (char)(0x80 | ((cp >> 6) & 63)); u[2] = (char)(0x80 | (cp & 63)); n = 3;
            } else {
                u[0] = (char)(0xF0 | (cp >> 18)); u[1] = (char)(0x80 | ((cp >> 12) & 63));
                u[2] = (char)(0x80 | ((cp >> 6) & 63)); u[3] = (char)(0x80 | (cp & 63)); n = 4;
            }
            if (buf_put(b, u, n)) return -1;
            continue;
        }
        default: return BAIL;
        }
        if (buf_putc(b, out)) return -1;
        p += 2;
    }
}

/* The span of a JSON string without escapes (field ids, tags). BAIL on escapes. */
static int raw_string(Parser *P, const unsigned char **s, Py_ssize_t *n) {
    ws(P);
    if (P->p >= P->end || *P->p != '"') return BAIL;
    const unsigned char *p = P->p + 1;
    while (p < P->end && *p != '"') {
        if (*p == '\\' || *p >= 0x80) return BAIL;
        p++;
    }
    if (p >= P->end) return BAIL;
    *s = P->p + 1;
    *n = p - *s;
    P->p = p + 1;
    return 0;
}

/* A JSON number token. *is_int: no fraction or exponent. BAIL if not JSON. */
static int number_token(Parser *P, const unsigned char **s, Py_ssize_t *n, int *is_int) {
    ws(P);
    const unsigned char *p = P->p, *end = P->end, *start = p;
    if (p < end && *p == '-') p++;
    if (p >= end || *p < '0' || *p > '9') return BAIL;
    if (*p == '0') p++;
    else while (p < end && *p >= '0' && *p <= '9') p++;
    *is_int = 1;
    if (p < end && *p == '.') {
        p++;
        if (p >= end || *p < '0' || *p > '9') return BAIL;
        while (p < end && *p >= '0' && *p <= '9') p++;
        *is_int = 0;
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        p++;
        if (p < end && (*p == '+' || *p == '-')) p++;
        if (p >= end || *p < '0' || *p > '9') return BAIL;
        while (p < end && *p >= '0' && *p <= '9') p++;
        *is_int = 0;
    }
    *s = start;
    *n = p - start;
    P->p = p;
    return 0;
}

/* Digits "-?[0-9]+" of at most 18 digits into *v; BAIL otherwise. "-0" BAILs (json reads it
 * as -0.0 in the Python code when parse_int is in effect). */
static int small_int(const unsigned char *s, Py_ssize_t n, long long *v) {
    int neg = n > 0 && s[0] == '-';
    Py_ssize_t digits = n - neg;
    if (digits < 1 || digits > 18) return BAIL;
    long long r = 0;
    for (Py_ssize_t i = neg; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return BAIL;
        r = r * 10 + (s[i] - '0');
    }
    if (neg && r == 0) return BAIL;
    *v = neg ? -r : r;
    return 0;
}

static int read_int(Parser *P, long long *v) {
    const unsigned char *s;
    Py_ssize_t n;
    int is_int, rc = number_token(P, &s, &n, &is_int);
    if (rc) return rc;
    if (!is_int) return BAIL;
    return small_int(s, n, v);
}

static int put_be(Buf *b, long long v, int size) {
    if (RESERVE(b, size)) return -1;
    for (int i = size - 1; i >= 0; i--) {
        b->p[b->len + i] = (char)(v & 0xFF);
        v >>= 8;
    }
    b->len += size;
    return 0;
}

static int put_int_typed(Buf *b, int t, long long v) {
    switch (t) {
    case T_I8: if (v < -128 || v > 127) return BAIL; return put_be(b, v, 1);
    case T_I16: if (v < -32768 || v > 32767) return BAIL; return put_be(b, v, 2);
    case T_I32: if (v < INT32_MIN || v > INT32_MAX) return BAIL; return put_be(b, v, 4);
    default: return put_be(b, v, 8);  /* 18 digits always fit an i64 */
    }
}

static int write_value(Parser *P, int t, PyObject *spec, int depth);

static int write_struct(Parser *P, PyObject *spec, int depth) {
    if (depth > MAX_DEPTH - 4) return BAIL;
    int rc = expect(P, '{');
    if (rc) return rc;
    ws(P);
    if (P->p < P->end && *P->p == '}') {
        P->p++;
        return buf_putc(&P->out, T_STOP);
    }
    const unsigned char *keys[64];
    Py_ssize_t key_lens[64];
    int nkeys = 0;
    for (;;) {
        const unsigned char *k;
        Py_ssize_t kn;
        long long fid;
        if ((rc = raw_string(P, &k, &kn))) return rc;
        if (kn > 6 || small_int(k, kn, &fid) || fid < -32768 || fid > 32767) return BAIL;
        if (kn == 2 && k[0] == '-' && k[1] == '0') return BAIL;
        /* duplicate keys: json keeps the last value at the first position */
        if (nkeys == 64) return BAIL;
        for (int i = 0; i < nkeys; i++)
            if (key_lens[i] == kn && memcmp(keys[i], k, kn) == 0) return BAIL;
        keys[nkeys] = k;
        key_lens[nkeys++] = kn;
        const unsigned char *tag;
        Py_ssize_t tn;
        if ((rc = expect(P, ':')) || (rc = expect(P, '{')) || (rc = raw_string(P, &tag, &tn)) || (rc = expect(P, ':')))
            return rc;
        int t = type_of_tag((const char *)tag, tn);
        if (t < 0) return BAIL;
        PyObject *fspec = field_spec(spec, (int)fid, t);
        if (!fspec && PyErr_Occurred()) return -1;
        if (RESERVE(&P->out, 3)) return -1;
        P->out.p[P->out.len++] = (char)t;
        if (put_be(&P->out, fid, 2)) return -1;
        if ((rc = write_value(P, t, fspec, depth))) return rc;
        if ((rc = expect(P, '}'))) return rc;
        ws(P);
        if (P->p >= P->end) return BAIL;
        if (*P->p == ',') { P->p++; continue; }
        if (*P->p == '}') { P->p++; break; }
        return BAIL;
    }
    return buf_putc(&P->out, T_STOP);
}

static int read_tag(Parser *P, int *t) {
    const unsigned char *tag;
    Py_ssize_t tn;
    int rc = raw_string(P, &tag, &tn);
    if (rc) return rc;
    *t = type_of_tag((const char *)tag, tn);
    return *t < 0 ? BAIL : 0;
}

/* After an element: ',' (more) -> 1, ']' -> 0, else BAIL (-> 2). */
static int next_elem(Parser *P) {
    ws(P);
    if (P->p >= P->end) return 2;
    if (*P->p == ',') { P->p++; return 1; }
    if (*P->p == ']') { P->p++; return 0; }
    return 2;
}

static int write_list(Parser *P, int t, PyObject *spec, int depth) {
    int rc, et;
    long long count;
    if ((rc = expect(P, '[')) || (rc = read_tag(P, &et)) || (rc = expect(P, ',')) || (rc = read_int(P, &count)))
        return rc;
    if (count < 0 || count > INT32_MAX) return BAIL;
    PyObject *espec = spec ? compat(PyTuple_GET_ITEM(spec, 1), et) : NULL;
    if (RESERVE(&P->out, 5)) return -1;
    P->out.p[P->out.len++] = (char)et;
    if (put_be(&P->out, count, 4)) return -1;
    long long seen = 0;
    for (;;) {
        int more = next_elem(P);
        if (more == 2) return BAIL;
        if (!more) break;
        if ((rc = write_value(P, et, espec, depth))) return rc;
        seen++;
    }
    (void)t;
    return seen == count ? 0 : BAIL;
}

/* The JSON string at P->p written to the output as strict binary writes a string: an i32
 * length, then the UTF-8 bytes; *at is where the length stands. Longer than an i32: BAIL. */
static int write_string(Parser *P, Py_ssize_t *at) {
    int rc;
    *at = P->out.len;
    if (RESERVE(&P->out, 4)) return -1;
    P->out.len += 4;
    if ((rc = read_string(P, &P->out))) return rc;
    Py_ssize_t n = P->out.len - *at - 4;
    if (n > INT32_MAX) return BAIL;
    unsigned char *q = (unsigned char *)P->out.p + *at;
    q[0] = (unsigned char)(n >> 24); q[1] = (unsigned char)(n >> 16); q[2] = (unsigned char)(n >> 8); q[3] = (unsigned char)n;
    return 0;
}

/* Map keys are JSON strings: str keys as strings, integer/bool keys as "-?[0-9]{1,20}"
 * (to_binary._write_key). Other key types: BAIL. Records each key's decoded form for the
 * duplicate check. */
typedef struct {
    const unsigned char *in;  /* key text in the input (integer keys), or NULL */
    Py_ssize_t off, len;      /* else: decoded key at out.p + off (the output may move) */
} KeySpan;

static int write_key(Parser *P, int kt, PyObject *kspec, KeySpan *key) {
    int rc;
    if (kt == T_STRING) {
        if (is_binary(kspec)) return BAIL;
        Py_ssize_t at;
        if ((rc = write_string(P, &at))) return rc;
        key->in = NULL;
        key->off = at + 4;
        key->len = P->out.len - at - 4;
        return 0;
    }
    if (kt == T_I8 || kt == T_I16 || kt == T_I32 || kt == T_I64 || kt == T_BOOL) {
        const unsigned char *k;
        Py_ssize_t kn;
        long long v;
        if ((rc = raw_string(P, &k, &kn))) return rc;
        /* small_int refuses "-0"; int("-0") is 0, but keep the rare forms in Python */
        if (small_int(k, kn, &v)) return BAIL;
        key->in = k;
        key->len = kn;
        if (kt == T_BOOL) return buf_putc(&P->out, v ? 1 : 0);
        return put_int_typed(&P->out, kt, v);
    }
    return BAIL;
}

static int write_map(Parser *P, PyObject *spec, int depth) {
    int rc, kt, vt;
    long long count;
    if ((rc = expect(P, '[')) || (rc = read_tag(P, &kt)) || (rc = expect(P, ',')) || (rc = read_tag(P, &vt)) ||
        (rc = expect(P, ',')) || (rc = read_int(P, &count)) || (rc = expect(P, ',')) || (rc = expect(P, '{')))
        return rc;
    if (count < 0 || count > INT32_MAX) return BAIL;
    PyObject *kspec = spec ? compat(PyTuple_GET_ITEM(spec, 1), kt) : NULL;
    PyObject *vspec = spec ? compat(PyTuple_GET_ITEM(spec, 2), vt) : NULL;
    if (RESERVE(&P->out, 6)) return -1;
    P->out.p[P->out.len++] = (char)kt;
    P->out.p[P->out.len++] = (char)vt;
    if (put_be(&P->out, count, 4)) return -1;
    KeySpan keys[32];
    long long seen = 0;
    ws(P);
    if (P->p < P->end && *P->p == '}') {
        P->p++;
    } else {
        for (;;) {
            KeySpan key;
            if ((rc = write_key(P, kt, kspec, &key))) return rc;
            /* json keeps one entry per distinct key: leave duplicates to the Python code */
            if (seen >= 32) return BAIL;
            const char *b = key.in ? (const char *)key.in : P->out.p + key.off;
            for (long long i = 0; i < seen; i++) {
                const char *a = keys[i].in ? (const char *)keys[i].in : P->out.p + keys[i].off;
                if (keys[i].len == key.len && memcmp(a, b, key.len) == 0) return BAIL;
            }
            keys[seen++] = key;
            if ((rc = expect(P, ':'))) return rc;
            if ((rc = write_value(P, vt, vspec, depth))) return rc;
            ws(P);
            if (P->p >= P->end) return BAIL;
            if (*P->p == ',') { P->p++; continue; }
            if (*P->p == '}') { P->p++; break; }
            return BAIL;
        }
    }
    if ((rc = expect(P, ']'))) return rc;
    return seen == count ? 0 : BAIL;
}

static int write_value(Parser *P, int t, PyObject *spec, int depth) {
    int rc;
    switch (t) {
    case T_STRING: {
        if (is_binary(spec)) {
            P->scratch.len = 0;
            if ((rc = read_string(P, &P->scratch))) return rc;
            PyObject *text = PyUnicode_DecodeUTF8(P->scratch.p ? P->scratch.p : "", P->scratch.len, NULL);
            if (!text) { PyErr_Clear(); return BAIL; }
            PyObject *raw = PyObject_CallOneArg(decode_base64, text);
            Py_DECREF(text);
            if (!raw) { PyErr_Clear(); return BAIL; }
            Py_ssize_t n = PyBytes_GET_SIZE(raw);
            rc = n > INT32_MAX ? BAIL : (put_be(&P->out, n, 4) || buf_put(&P->out, PyBytes_AS_STRING(raw), n)) ? -1 : 0;
            Py_DECREF(raw);
            return rc;
        }
        Py_ssize_t at;
        return write_string(P, &at);
    }
    case T_I8: case T_I16: case T_I32: case T_I64: {
        long long v;
        if ((rc = read_int(P, &v))) return rc;
        return put_int_typed(&P->out, t, v);
    }
    case T_BOOL: {
        ws(P);
        if (P->end - P->p >= 4 && memcmp(P->p, "true", 4) == 0) { P->p += 4; return buf_putc(&P->out, 1); }
        if (P->end - P->p >= 5 && memcmp(P->p, "false", 5) == 0) { P->p += 5; return buf_putc(&P->out, 0); }
        long long v;
        if ((rc = read_int(P, &v))) return rc;
        return buf_putc(&P->out, v ? 1 : 0);
    }
    case T_DOUBLE: {
        double v;
        ws(P);
        if (P->p < P->end && *P->p == '"') {
            const unsigned char *s;
            Py_ssize_t n;
            if ((rc = raw_string(P, &s, &n))) return rc;
            if (n == 3 && memcmp(s, "NaN", 3) == 0) v = NAN_VALUE;
            else if (n == 8 && memcmp(s, "Infinity", 8) == 0) v = INF_VALUE;
            else if (n == 9 && memcmp(s, "-Infinity", 9) == 0) v = -INF_VALUE;
            else return BAIL;
        } else {
            const unsigned char *s;
            Py_ssize_t n;
            int is_int;
            if ((rc = number_token(P, &s, &n, &is_int))) return rc;
            /* tjson_syntax.MAX_FLOAT_LITERAL: longer fractions/exponents are refused by the Python code */
            if (n > 300 || (!is_int && n > 64) || (is_int && n == 2 && s[0] == '-' && s[1] == '0')) return BAIL;
            char tmp[320];
            memcpy(tmp, s, n);
            tmp[n] = 0;
            char *stop;
            v = PyOS_string_to_double(tmp, &stop, NULL);  /* float(token), correctly rounded */
            if (v == -1.0 && PyErr_Occurred()) { PyErr_Clear(); return BAIL; }
            if (stop != tmp + n || v == INF_VALUE || v == -INF_VALUE) return BAIL;
        }
        if (RESERVE(&P->out, 8)) return -1;
        if (PyFloat_Pack8(v, P->out.p + P->out.len, 0)) return -1;
        P->out.len += 8;
        return 0;
    }
    case T_STRUCT:
        return write_struct(P, PyDict_CheckExact(spec ? spec : Py_None) ? spec : NULL, depth + 1);
    case T_LIST: case T_SET:
        if (depth + 1 > MAX_DEPTH - 4) return BAIL;
        return write_list(P, t, spec, depth + 1);
    case T_MAP:
        if (depth + 1 > MAX_DEPTH - 4) return BAIL;
        return write_map(P, spec, depth + 1);
    default:
        return BAIL;
    }
}

/* tjson_call_to_binary(body, args) -> (name, type, seqid, message) | None */
static PyObject *py_tjson_call_to_binary(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2 || !PyDict_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "tjson_call_to_binary(body: bytes, args: dict)");
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE)) return NULL;
    Parser P = {.p = view.buf, .end = (const unsigned char *)view.buf + view.len};
    PyObject *result = NULL, *name = NULL;
    long long version, mtype, seqid;
    int rc;
    if ((rc = expect(&P, '[')) || (rc = read_int(&P, &version)) || (rc = expect(&P, ','))) goto done;
    if (version != 1) { rc = BAIL; goto done; }
    if ((rc = read_string(&P, &P.scratch))) goto done;
    if (P.scratch.len > MAX_NAME_BYTES) { rc = BAIL; goto done; }
    name = PyUnicode_DecodeUTF8(P.scratch.p ? P.scratch.p : "", P.scratch.len, NULL);
    if (!name) { PyErr_Clear(); rc = BAIL; goto done; }
    if ((rc = expect(&P, ',')) || (rc = read_int(&P, &mtype)) || (rc = expect(&P, ',')) ||
        (rc = read_int(&P, &seqid)) || (rc = expect(&P, ',')))
        goto done;
    if ((mtype != 1 && mtype != 4) || seqid < INT32_MIN || seqid > INT32_MAX) { rc = BAIL; goto done; }
    PyObject *spec = PyDict_GetItemWithError(args[1], name);
    if (!spec && PyErr_Occurred()) { rc = -1; goto done; }
    if ((rc = put_be(&P.out, VERSION_1 | (uint32_t)mtype, 4)) || (rc = put_be(&P.out, P.scratch.len, 4)) ||
        (rc = buf_put(&P.out, P.scratch.p ? P.scratch.p : "", P.scratch.len)) || (rc = put_be(&P.out, seqid, 4)))
        goto done;
    if ((rc = write_struct(&P, spec, 0))) goto done;
    if ((rc = expect(&P, ']'))) goto done;
    ws(&P);
    if (P.p != P.end) { rc = BAIL; goto done; }
    result = Py_BuildValue("(OLLy#)", name, mtype, seqid, P.out.p, P.out.len);
done:
    if (rc == BAIL && !result) result = Py_NewRef(Py_None);
    Py_XDECREF(name);
    buf_free(&P.out);
    buf_free(&P.scratch);
    PyBuffer_Release(&view);
    return result;
}

/* ------------------------------------------------------------------ module */

static PyMethodDef module_methods[] = {
    {"tjson_call_to_binary", (PyCFunction)(void (*)(void))py_tjson_call_to_binary, METH_FASTCALL,
     "tjson_call_to_binary(body: bytes, args: dict) -> (name, type, seqid, message) | None\n\n"
     "One TJSON CALL/ONEWAY as a strict-binary message; None when the Python code must decide."},
    {NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "gateway.thrift._speedups",
    "Compiled hot paths of the TJSON <-> strict binary translation (see _speedups.c).", -1, module_methods,
};

PyMODINIT_FUNC PyInit__speedups(void) {
    PyObject *errors = PyImport_ImportModule("gateway.thrift.errors");
    if (!errors) return NULL;
    ProtocolError = PyObject_GetAttrString(errors, "ProtocolError");
    Py_DECREF(errors);
    PyObject *tjson = PyImport_ImportModule("gateway.thrift.tjson_syntax");
    if (!tjson) return NULL;
    encode_base64 = PyObject_GetAttrString(tjson, "encode_base64");
    decode_base64 = PyObject_GetAttrString(tjson, "decode_base64");
    PyObject *special = PyObject_GetAttrString(tjson, "_SPECIAL_DOUBLES");
    Py_DECREF(tjson);
    if (!ProtocolError || !encode_base64 || !decode_base64 || !special) return NULL;
    PyObject *nan = PyDict_GetItemString(special, "NaN"), *inf = PyDict_GetItemString(special, "Infinity");
    if (!nan || !inf) { Py_DECREF(special); PyErr_SetString(PyExc_ImportError, "tjson_syntax._SPECIAL_DOUBLES"); return NULL; }
    NAN_VALUE = PyFloat_AsDouble(nan);
    INF_VALUE = PyFloat_AsDouble(inf);
    Py_DECREF(special);
    if (PyType_Ready(&TranslatorType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module_def);
    if (!m) return NULL;
    Py_INCREF(&TranslatorType);
    if (PyModule_AddObject(m, "ReplyTranslator", (PyObject *)&TranslatorType) < 0) {
        Py_DECREF(&TranslatorType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
