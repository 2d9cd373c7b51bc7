/* The V1 CommitLog record's layout constants and big-endian accessors, shared by the C modules
 * that write or read records (_record_speedups.c, _batch_speedups.c). The layout itself is declared
 * in shoal/formats/record.py; these mirror it, and the modules' tests hold them to it. */
#ifndef SHOAL_RECORD_LAYOUT_H
#define SHOAL_RECORD_LAYOUT_H

#include <stdint.h>

#define MESSAGE_MAGIC_CODE ((int32_t)0xDAA320A7)
#define MESSAGE_MAGIC_CODE_V2 ((int32_t)0xDAA320AB)
#define BLANK_MAGIC_CODE ((int32_t)0xCBD43194)
#define BORNHOST_V6_FLAG 0x10
#define STOREHOSTADDRESS_V6_FLAG 0x20
#define HEADER_WITHOUT_HOSTS_BYTES 72  /* TOTALSIZE .. BODYLENGTH without the two hosts */
#define FIXED_LENGTH_V4_BYTES 91        /* a V1 IPv4/IPv4 record without body, topic, properties */
#define BORN_HOST_AT 48
#define TOPIC_LENGTH_MAX 127            /* a V1 TOPICLENGTH is a signed byte */
#define PROPERTIES_LENGTH_MAX 32767     /* PROPERTIESLENGTH is a signed short */
#define INT32_LOW (-2147483647LL - 1)
#define INT32_HIGH 2147483647LL

static inline void put32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

static inline void put64(unsigned char *p, uint64_t v)
{
    put32(p, (uint32_t)(v >> 32));
    put32(p + 4, (uint32_t)v);
}

static inline int32_t get32(const unsigned char *p)
{
    return (int32_t)(((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | (uint32_t)p[3]);
}

static inline int64_t get64(const unsigned char *p)
{
    return (int64_t)(((uint64_t)(uint32_t)get32(p) << 32) | (uint64_t)(uint32_t)get32(p + 4));
}

static inline int16_t get16(const unsigned char *p)
{
    return (int16_t)(((uint16_t)p[0] << 8) | (uint16_t)p[1]);
}

/* An int argument within [low, high]; -1 with ValueError set otherwise (include Python.h first). */
static inline int
ranged(PyObject *value, long long low, long long high, const char *name, long long *out)
{
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(value, &overflow);
    if (v == -1 && PyErr_Occurred()) {
        return -1;
    }
    if (overflow || v < low || v > high) {
        PyErr_Format(PyExc_ValueError, "%s does not fit its field", name);
        return -1;
    }
    *out = v;
    return 0;
}


#endif
