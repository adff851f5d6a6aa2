#ifndef PUSHEMU_CNGHTTP2_SHIM_H
#define PUSHEMU_CNGHTTP2_SHIM_H
#include <nghttp2/nghttp2.h>

/* nghttp2_nv with both NO_COPY flags cleared: Swift cannot build the struct's
   uint8_t* members from const pointers without casts, so do it here. */
static inline nghttp2_nv pushemu_nv(const uint8_t *name, size_t namelen,
                                    const uint8_t *value, size_t valuelen) {
    nghttp2_nv nv;
    nv.name = (uint8_t *)name;
    nv.namelen = namelen;
    nv.value = (uint8_t *)value;
    nv.valuelen = valuelen;
    nv.flags = NGHTTP2_NV_FLAG_NONE;
    return nv;
}

/* The same with the flags given (NGHTTP2_NV_FLAG_*). */
static inline nghttp2_nv pushemu_nv_flags(const uint8_t *name, size_t namelen,
                                          const uint8_t *value, size_t valuelen, uint8_t flags) {
    nghttp2_nv nv = pushemu_nv(name, namelen, value, valuelen);
    nv.flags = flags;
    return nv;
}

/* Frame header fields through the nghttp2_frame union. */
static inline uint8_t pushemu_frame_type(const nghttp2_frame *f) { return f->hd.type; }
static inline uint8_t pushemu_frame_flags(const nghttp2_frame *f) { return f->hd.flags; }
static inline int32_t pushemu_frame_stream_id(const nghttp2_frame *f) { return f->hd.stream_id; }
static inline uint8_t pushemu_hd_type(const nghttp2_frame_hd *hd) { return hd->type; }
static inline uint8_t pushemu_hd_flags(const nghttp2_frame_hd *hd) { return hd->flags; }
static inline size_t pushemu_hd_length(const nghttp2_frame_hd *hd) { return hd->length; }
static inline int pushemu_frame_headers_category(const nghttp2_frame *f) { return (int)f->headers.cat; }
#endif
