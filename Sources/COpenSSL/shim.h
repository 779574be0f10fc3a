#ifndef HERALD_COPENSSL_SHIM_H
#define HERALD_COPENSSL_SHIM_H
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rsa.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/bio.h>
#include <openssl/x509.h>
#include <openssl/rand.h>
#include <openssl/sha.h>

/* Macros Swift cannot import, as functions. */
static inline long herald_bio_get_mem_data(BIO *b, char **p) { return BIO_get_mem_data(b, p); }
static inline long herald_ssl_ctx_set_mode(SSL_CTX *c, long m) { return SSL_CTX_set_mode(c, m); }
/* EVP_RSA_gen is a variadic macro. */
static inline EVP_PKEY *herald_rsa_generate(unsigned int bits) { return EVP_RSA_gen(bits); }
#endif
