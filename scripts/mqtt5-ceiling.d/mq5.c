// A bare MQTT 5 client for measuring a broker's one-way ceiling under its Receive Maximum
// (scripts/mqtt5-ceiling runs it). Trusts the broker it measures: a measuring tool, not a client.
// mq5 sub PORT COUNT         subscribes c5/# at QoS 1, PUBACKs every PUBLISH, exits after COUNT
// mq5 pub PORT SIZE COUNT    publishes COUNT QoS 1 messages of SIZE bytes on c5/t with the user
//                            property imagent-seq, at most the broker's Receive Maximum in flight;
//                            prints msg/s from the first PUBLISH to the last PUBACK
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static int dial(int port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    a.sin_addr.s_addr = htonl(0x7f000001);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0) { perror("connect"); exit(1); }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

static size_t varint(unsigned char *p, size_t v) {
    size_t n = 0;
    do { unsigned char b = v % 128; v /= 128; if (v) b |= 128; p[n++] = b; } while (v);
    return n;
}

static void writeall(int fd, const unsigned char *p, size_t n) {
    while (n) { ssize_t w = write(fd, p, n); if (w <= 0) { perror("write"); exit(1); } p += w; n -= w; }
}

static unsigned char in[1 << 20];
static size_t have;

// The whole packet at `at` in `in`: its length, its body's place in *bodyAt and *bodyLen; 0 if incomplete.
static size_t nextPacket(size_t at, size_t *bodyAt, size_t *bodyLen) {
    if (have - at < 2) return 0;
    size_t len = 0, mul = 1, i = at + 1;
    for (;;) {
        if (i >= have || i - at > 4) return 0;
        unsigned char b = in[i++];
        len += (b & 127) * mul; mul *= 128;
        if (!(b & 128)) break;
    }
    if (have - i < len) return 0;
    *bodyAt = i; *bodyLen = len;
    return i - at + len;
}

static int connectMQTT(int fd, const char *id) {
    unsigned char p[64], *q = p + 5;
    unsigned char vh[] = {0, 4, 'M', 'Q', 'T', 'T', 5, 0x02, 0, 60, 0};
    memcpy(q, vh, sizeof vh); q += sizeof vh;
    size_t idn = strlen(id); *q++ = 0; *q++ = idn; memcpy(q, id, idn); q += idn;
    size_t body = q - (p + 5);
    unsigned char hdr[5]; hdr[0] = 0x10; size_t h = 1 + varint(hdr + 1, body);
    memcpy(p + 5 - h, hdr, h);
    writeall(fd, p + 5 - h, h + body);
    int receiveMaximum = 65535;
    for (;;) {
        ssize_t r = read(fd, in + have, sizeof in - have);
        if (r <= 0) { fprintf(stderr, "no CONNACK\n"); exit(1); }
        have += r;
        size_t bodyAt, bodyLen, n = nextPacket(0, &bodyAt, &bodyLen);
        if (!n) continue;
        if (in[0] != 0x20 || in[bodyAt + 1] != 0) { fprintf(stderr, "CONNACK refused\n"); exit(1); }
        size_t pa = bodyAt + 2, plen = 0, mul = 1;
        for (;;) { unsigned char b = in[pa++]; plen += (b & 127) * mul; mul *= 128; if (!(b & 128)) break; }
        for (size_t i = pa; i < pa + plen;) {
            unsigned char id = in[i++];
            if (id == 0x21) { receiveMaximum = in[i] << 8 | in[i + 1]; i += 2; }
            else if (id == 0x22 || id == 0x13) i += 2;
            else if (id == 0x24 || id == 0x25 || id == 0x28 || id == 0x29 || id == 0x2A) i += 1;
            else if (id == 0x27 || id == 0x11) i += 4;
            else break;  // one we do not need after the ones we do
        }
        memmove(in, in + n, have - n); have -= n;
        return receiveMaximum;
    }
}

static double now(void) {
    struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static void subscriber(int port, long count) {
    int fd = dial(port);
    connectMQTT(fd, "mq5-sub");
    unsigned char sub[] = {0x82, 0, 0, 1, 0, 0, 4, 'c', '5', '/', '#', 0x01};
    sub[1] = sizeof sub - 2;
    writeall(fd, sub, sizeof sub);
    long received = 0;
    static unsigned char out[1 << 16];
    while (received < count) {
        ssize_t r = read(fd, in + have, sizeof in - have);
        if (r <= 0) { fprintf(stderr, "sub: closed after %ld\n", received); exit(1); }
        have += r;
        size_t at = 0, o = 0, bodyAt, bodyLen, n;
        while ((n = nextPacket(at, &bodyAt, &bodyLen))) {
            if ((in[at] & 0xF0) == 0x30) {
                size_t topicLen = in[bodyAt] << 8 | in[bodyAt + 1];
                size_t idAt = bodyAt + 2 + topicLen;
                unsigned char ack[] = {0x40, 2, in[idAt], in[idAt + 1]};
                memcpy(out + o, ack, 4); o += 4;
                if (o + 4 > sizeof out) { writeall(fd, out, o); o = 0; }
                received++;
            }
            at += n;
        }
        if (o) writeall(fd, out, o);
        memmove(in, in + at, have - at); have -= at;
    }
    printf("sub: %ld received\n", received);
}

static void publisher(int port, size_t size, long count) {
    int fd = dial(port);
    int receiveMaximum = connectMQTT(fd, "mq5-pub");
    unsigned char *out = malloc((size + 64) * receiveMaximum);
    unsigned char *payload = calloc(1, size);
    long sent = 0, acked = 0;
    int inFlight = 0;
    double start = now();
    while (acked < count) {
        size_t o = 0;
        while (sent < count && inFlight < receiveMaximum) {
            char seq[24]; int seqLen = snprintf(seq, sizeof seq, "%ld", sent + 1);
            unsigned char props[64]; size_t pl = 0;
            props[pl++] = 0x26; props[pl++] = 0; props[pl++] = 11; memcpy(props + pl, "imagent-seq", 11); pl += 11;
            props[pl++] = 0; props[pl++] = seqLen; memcpy(props + pl, seq, seqLen); pl += seqLen;
            unsigned char plv[4]; size_t plvn = varint(plv, pl);
            unsigned id = (unsigned)(sent % 65535) + 1;
            size_t body = 2 + 4 + 2 + plvn + pl + size;
            out[o++] = 0x32; o += varint(out + o, body);
            out[o++] = 0; out[o++] = 4; memcpy(out + o, "c5/t", 4); o += 4;
            out[o++] = id >> 8; out[o++] = id & 255;
            memcpy(out + o, plv, plvn); o += plvn; memcpy(out + o, props, pl); o += pl;
            memcpy(out + o, payload, size); o += size;
            sent++; inFlight++;
        }
        if (o) writeall(fd, out, o);
        ssize_t r = read(fd, in + have, sizeof in - have);
        if (r <= 0) { fprintf(stderr, "pub: closed\n"); exit(1); }
        have += r;
        size_t at = 0, bodyAt, bodyLen, n;
        while ((n = nextPacket(at, &bodyAt, &bodyLen))) {
            if (in[at] == 0x40) {
                if (bodyLen > 2 && in[bodyAt + 2] >= 0x80) { fprintf(stderr, "PUBACK reason %d\n", in[bodyAt + 2]); exit(1); }
                acked++; inFlight--;
            }
            at += n;
        }
        memmove(in, in + at, have - at); have -= at;
    }
    double seconds = now() - start;
    printf("pub: %ld messages of %zu bytes in %.3f s: %.0f msg/s (at most %d in flight)\n", count, size, seconds,
           count / seconds, receiveMaximum);
}

int main(int argc, char **argv) {
    if (argc == 4 && !strcmp(argv[1], "sub")) subscriber(atoi(argv[2]), atol(argv[3]));
    else if (argc == 5 && !strcmp(argv[1], "pub")) publisher(atoi(argv[2]), atol(argv[3]), atol(argv[4]));
    else { fprintf(stderr, "usage: mq5 sub PORT COUNT | mq5 pub PORT SIZE COUNT\n"); return 2; }
    return 0;
}
