#ifndef PUSHEMU_COPENSSL_SHIM_H
#define PUSHEMU_COPENSSL_SHIM_H
#include <openssl/ssl.h>
#include <openssl/err.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <openssl/pem.h>
#include <openssl/evp.h>
#include <openssl/bio.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

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
#endif
