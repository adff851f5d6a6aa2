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

/* The same, sent as a never-indexed literal: for values that are unique per response (ids),
   which would otherwise churn the HPACK dynamic table on every response. */
static inline nghttp2_nv pushemu_nv_no_index(const uint8_t *name, size_t namelen,
                                             const uint8_t *value, size_t valuelen) {
    nghttp2_nv nv = pushemu_nv(name, namelen, value, valuelen);
    nv.flags = NGHTTP2_NV_FLAG_NO_INDEX;
    return nv;
}

/* nghttp2_nv for a lowercase name and a value that outlive the frame (memory never freed):
   nghttp2 neither copies nor lowercases them. */
static inline nghttp2_nv pushemu_nv_static(const uint8_t *name, size_t namelen,
                                           const uint8_t *value, size_t valuelen) {
    nghttp2_nv nv = pushemu_nv(name, namelen, value, valuelen);
    nv.flags = NGHTTP2_NV_FLAG_NO_COPY_NAME | NGHTTP2_NV_FLAG_NO_COPY_VALUE;
    return nv;
}

/* The same with only the name kept (the value is copied). */
static inline nghttp2_nv pushemu_nv_static_name(const uint8_t *name, size_t namelen,
                                                const uint8_t *value, size_t valuelen) {
    nghttp2_nv nv = pushemu_nv(name, namelen, value, valuelen);
    nv.flags = NGHTTP2_NV_FLAG_NO_COPY_NAME;
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
