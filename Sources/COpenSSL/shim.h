#ifndef PUSHEMU_COPENSSL_SHIM_H
#define PUSHEMU_COPENSSL_SHIM_H
#include <string.h>
#include <openssl/ssl.h>
#include <openssl/err.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <openssl/pem.h>
#include <openssl/evp.h>
#include <openssl/bio.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <openssl/ec.h>
#include <openssl/core_names.h>
#include <openssl/params.h>

/* Macros and bit-shift constants Swift cannot import. */
static inline int pushemu_ssl_ctx_set_min_proto_version(SSL_CTX *ctx, int v) {
    return (int)SSL_CTX_set_min_proto_version(ctx, v);
}
static inline long pushemu_ssl_ctx_set_mode(SSL_CTX *ctx, long mode) {
    return SSL_CTX_set_mode(ctx, mode);
}
static inline void pushemu_ssl_ctx_set_server_options(SSL_CTX *ctx) {
    SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION |
                             SSL_OP_CIPHER_SERVER_PREFERENCE | SSL_OP_IGNORE_UNEXPECTED_EOF);
}
static inline void pushemu_openssl_free(void *p) { OPENSSL_free(p); }
static inline const char *pushemu_ssl_get_servername(const SSL *ssl) {
    return SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);
}
static inline long pushemu_ssl_ctx_set_session_cache_server(SSL_CTX *ctx) {
    return SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_SERVER);
}
/* Sessions kept for resumption, at most (OpenSSL's default is 20,480: a burst of handshakes
   would hold tens of MiB for the sessions' lifetime). */
static inline long pushemu_ssl_ctx_sess_set_cache_size(SSL_CTX *ctx, long n) {
    return SSL_CTX_sess_set_cache_size(ctx, n);
}
static inline long pushemu_ssl_ctx_add1_chain_cert(SSL_CTX *ctx, X509 *x) {
    return SSL_CTX_add1_chain_cert(ctx, x);
}
static inline long pushemu_ssl_ctx_set_read_ahead(SSL_CTX *ctx, long on) {
    return SSL_CTX_set_read_ahead(ctx, on);
}
/* A new P-256 key pair (EVP_EC_gen is a macro). */
static inline EVP_PKEY *pushemu_ec_p256_generate(void) { return EVP_EC_gen("P-256"); }
/* A new RSA key pair (EVP_RSA_gen is a macro over a variadic function). */
static inline EVP_PKEY *pushemu_rsa_generate(unsigned int bits) { return EVP_RSA_gen(bits); }
/* Adds a v3 extension given in openssl's config syntax ("critical,CA:FALSE", "DNS:host"),
   with the issuer for authorityKeyIdentifier (X509V3_CTX is a stack struct Swift cannot fill). */
static inline int pushemu_x509_add_ext(X509 *cert, X509 *issuer, int nid, const char *value) {
    X509V3_CTX ctx;
    X509V3_set_ctx_nodb(&ctx);
    X509V3_set_ctx(&ctx, issuer, cert, NULL, NULL, 0);
    X509_EXTENSION *ext = X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
    if (!ext) return 0;
    int ok = X509_add_ext(cert, ext, -1);
    X509_EXTENSION_free(ext);
    return ok;
}
/* The bytes held by a memory BIO. */
static inline long pushemu_bio_mem_data(BIO *b, char **p) { return BIO_get_mem_data(b, p); }
/* ---- P-256 with raw keys (Web Push: RFC 8291 ECDH, RFC 8292 VAPID) ---- */

/* A P-256 key from its uncompressed public point (65 bytes, 0x04 || x || y), and its private
   scalar (32 bytes) when `priv` is not NULL; NULL when the point is not on the curve. */
static inline EVP_PKEY *pushemu_p256_from_raw(const unsigned char *pub, size_t publen,
                                              const unsigned char *priv) {
    if (publen != 65 || pub[0] != 4) return NULL;
    EC_GROUP *group = EC_GROUP_new_by_curve_name(NID_X9_62_prime256v1);
    if (!group) return NULL;
    EC_POINT *point = EC_POINT_new(group);
    int on = point && EC_POINT_oct2point(group, point, pub, publen, NULL) == 1 &&
             EC_POINT_is_on_curve(group, point, NULL) == 1;
    EC_POINT_free(point);
    EC_GROUP_free(group);
    if (!on) return NULL;
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_name(NULL, "EC", NULL);
    if (!ctx) return NULL;
    EVP_PKEY *pkey = NULL;
    BIGNUM *bn = priv ? BN_bin2bn(priv, 32, NULL) : NULL;
    OSSL_PARAM params[4];
    int n = 0;
    params[n++] = OSSL_PARAM_construct_utf8_string(OSSL_PKEY_PARAM_GROUP_NAME, (char *)"P-256", 0);
    params[n++] = OSSL_PARAM_construct_octet_string(OSSL_PKEY_PARAM_PUB_KEY, (void *)pub, publen);
    unsigned char privle[32];
    if (bn) {
        /* OSSL_PARAM integers are native-endian. */
        BN_bn2nativepad(bn, privle, 32);
        params[n++] = OSSL_PARAM_construct_BN(OSSL_PKEY_PARAM_PRIV_KEY, privle, 32);
    }
    params[n] = OSSL_PARAM_construct_end();
    int ok = EVP_PKEY_fromdata_init(ctx) == 1 &&
             EVP_PKEY_fromdata(ctx, &pkey, bn ? EVP_PKEY_KEYPAIR : EVP_PKEY_PUBLIC_KEY, params) == 1;
    OPENSSL_cleanse(privle, sizeof privle);
    BN_clear_free(bn);
    EVP_PKEY_CTX_free(ctx);
    return ok ? pkey : NULL;
}

/* The uncompressed public point of a P-256 private scalar (32 bytes) into `pub` (65 bytes); 0
   when the scalar is out of range. */
static inline int pushemu_p256_public_of(const unsigned char *priv, unsigned char *pub) {
    EC_GROUP *group = EC_GROUP_new_by_curve_name(NID_X9_62_prime256v1);
    BIGNUM *d = BN_bin2bn(priv, 32, NULL);
    EC_POINT *point = group ? EC_POINT_new(group) : NULL;
    int ok = group && d && point && !BN_is_zero(d) && BN_cmp(d, EC_GROUP_get0_order(group)) < 0 &&
             EC_POINT_mul(group, point, d, NULL, NULL, NULL) == 1 &&
             EC_POINT_point2oct(group, point, POINT_CONVERSION_UNCOMPRESSED, pub, 65, NULL) == 65;
    EC_POINT_free(point);
    BN_clear_free(d);
    EC_GROUP_free(group);
    return ok;
}

/* A P-256 key's uncompressed public point (65 bytes) and private scalar (32 bytes). */
static inline int pushemu_p256_export(EVP_PKEY *pkey, unsigned char *pub, unsigned char *priv) {
    size_t len = 0;
    if (EVP_PKEY_get_octet_string_param(pkey, OSSL_PKEY_PARAM_ENCODED_PUBLIC_KEY, pub, 65, &len) != 1 || len != 65)
        return 0;
    if (!priv) return 1;
    BIGNUM *bn = NULL;
    if (EVP_PKEY_get_bn_param(pkey, OSSL_PKEY_PARAM_PRIV_KEY, &bn) != 1) return 0;
    int ok = BN_bn2binpad(bn, priv, 32) == 32;
    BN_clear_free(bn);
    return ok;
}

/* Verifies an ES256 signature in JWT form (r || s, 64 bytes) of `msg` by `pkey`. */
static inline int pushemu_es256_verify_raw(EVP_PKEY *pkey, const unsigned char *msg, size_t msglen,
                                           const unsigned char *sig) {
    ECDSA_SIG *s = ECDSA_SIG_new();
    BIGNUM *r = BN_bin2bn(sig, 32, NULL), *ss = BN_bin2bn(sig + 32, 32, NULL);
    if (!s || !r || !ss || ECDSA_SIG_set0(s, r, ss) != 1) {
        ECDSA_SIG_free(s); BN_free(r); BN_free(ss);
        return 0;
    }
    unsigned char *der = NULL;
    int derlen = i2d_ECDSA_SIG(s, &der);
    ECDSA_SIG_free(s);
    if (derlen <= 0) return 0;
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    int ok = md && EVP_DigestVerifyInit(md, NULL, EVP_sha256(), NULL, pkey) == 1 &&
             EVP_DigestVerify(md, der, (size_t)derlen, msg, msglen) == 1;
    EVP_MD_CTX_free(md);
    OPENSSL_free(der);
    return ok;
}

/* Signs `msg` with ES256, writing r || s (64 bytes). */
static inline int pushemu_es256_sign_raw(EVP_PKEY *pkey, const unsigned char *msg, size_t msglen,
                                         unsigned char *sig) {
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    unsigned char der[80];
    size_t derlen = sizeof der;
    int ok = md && EVP_DigestSignInit(md, NULL, EVP_sha256(), NULL, pkey) == 1 &&
             EVP_DigestSign(md, der, &derlen, msg, msglen) == 1;
    EVP_MD_CTX_free(md);
    if (!ok) return 0;
    const unsigned char *p = der;
    ECDSA_SIG *s = d2i_ECDSA_SIG(NULL, &p, (long)derlen);
    if (!s) return 0;
    ok = BN_bn2binpad(ECDSA_SIG_get0_r(s), sig, 32) == 32 && BN_bn2binpad(ECDSA_SIG_get0_s(s), sig + 32, 32) == 32;
    ECDSA_SIG_free(s);
    return ok;
}

/* AES-128-GCM with a 12-byte nonce and no associated data. Decrypts `in` (ciphertext, then a
   16-byte tag) into `out` (inlen - 16 bytes), or encrypts `in` into `out` (inlen + 16 bytes);
   0 when the tag does not match. */
static inline int pushemu_aes128gcm_with(const EVP_CIPHER *cipher, int encrypt, const unsigned char *key, const unsigned char *nonce,
                                    const unsigned char *in, size_t inlen, unsigned char *out) {
    if (!encrypt && inlen < 16) return 0;
    size_t n = encrypt ? inlen : inlen - 16;
    EVP_CIPHER_CTX *c = EVP_CIPHER_CTX_new();
    int len = 0, ok = c && EVP_CipherInit_ex(c, cipher, NULL, NULL, NULL, encrypt) == 1 &&
                      EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_SET_IVLEN, 12, NULL) == 1 &&
                      EVP_CipherInit_ex(c, NULL, NULL, key, nonce, encrypt) == 1;
    if (ok && n > 0) ok = EVP_CipherUpdate(c, out, &len, in, (int)n) == 1;
    if (ok && !encrypt) ok = EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_SET_TAG, 16, (void *)(in + n)) == 1;
    if (ok) ok = EVP_CipherFinal_ex(c, out + len, &len) == 1;
    if (ok && encrypt) ok = EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_GET_TAG, 16, out + n) == 1;
    EVP_CIPHER_CTX_free(c);
    return ok;
}

/* AES-128-GCM and SHA-256 fetched once from the default provider, by the caller (a browser
   decrypting many pushes: the implicit fetch of EVP_aes_128_gcm() and HMAC() costs more than
   the work on a push-sized message). */
static inline EVP_CIPHER *pushemu_fetch_aes128gcm(void) { return EVP_CIPHER_fetch(NULL, "AES-128-GCM", NULL); }
static inline EVP_MD *pushemu_fetch_sha256(void) { return EVP_MD_fetch(NULL, "SHA256", NULL); }
/* HMAC-SHA256 (RFC 2104) over the fetched `sha256`, into `out` (32 bytes). */
static inline int pushemu_hmac_sha256_with(const EVP_MD *sha256, const unsigned char *key, size_t keylen,
                                           const unsigned char *data, size_t datalen, unsigned char *out) {
    unsigned char k[64] = {0}, pad[64], inner[32];
    unsigned int len = 0;
    EVP_MD_CTX *c = EVP_MD_CTX_new();
    int ok = c != NULL && sha256 != NULL;
    if (ok && keylen > 64) {
        ok = EVP_DigestInit_ex(c, sha256, NULL) == 1 && EVP_DigestUpdate(c, key, keylen) == 1 &&
             EVP_DigestFinal_ex(c, k, &len) == 1;
    } else if (ok && keylen > 0) {
        memcpy(k, key, keylen);
    }
    for (int i = 0; i < 64; i++) pad[i] = k[i] ^ 0x36;
    ok = ok && EVP_DigestInit_ex(c, sha256, NULL) == 1 && EVP_DigestUpdate(c, pad, 64) == 1 &&
         EVP_DigestUpdate(c, data, datalen) == 1 && EVP_DigestFinal_ex(c, inner, &len) == 1;
    for (int i = 0; i < 64; i++) pad[i] = k[i] ^ 0x5c;
    ok = ok && EVP_DigestInit_ex(c, sha256, NULL) == 1 && EVP_DigestUpdate(c, pad, 64) == 1 &&
         EVP_DigestUpdate(c, inner, 32) == 1 && EVP_DigestFinal_ex(c, out, &len) == 1 && len == 32;
    EVP_MD_CTX_free(c);
    return ok;
}
/* ECDH on P-256 from raw forms, without EVP's provider lookups (a browser decrypting many
   pushes): x(priv * peer) with P-256's `group` (`pushemu_p256_group`), 32 bytes into `secret`;
   0 when the peer's point is not on the curve. */
static inline int pushemu_p256_ecdh_raw(const EC_GROUP *group, const unsigned char *priv, const unsigned char *peer,
                                        unsigned char *secret) {
    BN_CTX *ctx = BN_CTX_new();
    EC_POINT *p = group ? EC_POINT_new(group) : NULL, *r = group ? EC_POINT_new(group) : NULL;
    BIGNUM *d = BN_bin2bn(priv, 32, NULL), *x = BN_new();
    int ok = group && ctx && p && r && d && x && peer[0] == 4 &&
             EC_POINT_oct2point(group, p, peer, 65, ctx) == 1 && EC_POINT_is_on_curve(group, p, ctx) == 1 &&
             EC_POINT_mul(group, r, NULL, p, d, ctx) == 1 && EC_POINT_is_at_infinity(group, r) == 0 &&
             EC_POINT_get_affine_coordinates(group, r, x, NULL, ctx) == 1 && BN_bn2binpad(x, secret, 32) == 32;
    BN_free(x);
    BN_clear_free(d);
    EC_POINT_free(r);
    EC_POINT_free(p);
    BN_CTX_free(ctx);
    return ok;
}
/* P-256's group, made once by the caller and shared (only read by EC operations). */
static inline EC_GROUP *pushemu_p256_group(void) { return EC_GROUP_new_by_curve_name(NID_X9_62_prime256v1); }
#endif
