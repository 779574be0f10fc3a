#ifndef HERALD_COPENSSL_SHIM_H
#define HERALD_COPENSSL_SHIM_H
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rsa.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/bio.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <openssl/rand.h>
#include <openssl/sha.h>
#include <openssl/ec.h>
#include <openssl/bn.h>
#include <openssl/decoder.h>

/* Macros Swift cannot import, as functions. */
static inline long herald_bio_get_mem_data(BIO *b, char **p) { return BIO_get_mem_data(b, p); }
static inline long herald_ssl_ctx_set_mode(SSL_CTX *c, long m) { return SSL_CTX_set_mode(c, m); }
/* EVP_RSA_gen is a variadic macro. */
static inline EVP_PKEY *herald_rsa_generate(unsigned int bits) { return EVP_RSA_gen(bits); }
/* EVP_EC_gen is a macro over a variadic function. */
static inline EVP_PKEY *herald_p256_generate(void) { return EVP_EC_gen("P-256"); }

/* A PKCS#8 PEM RSA private key (`BEGIN PRIVATE KEY`, as service accounts carry) read with the
   decoders for that shape only: OpenSSL 3's PEM_read_bio_PrivateKey tries every decoder it has,
   about three times the work (0.40 against 0.12 ms for a 2048-bit key). NULL when the text is not
   one; the caller then reads it with the general reader. */
static inline EVP_PKEY *herald_read_pkcs8_rsa_pem(BIO *bio) {
    EVP_PKEY *key = NULL;
    OSSL_DECODER_CTX *context = OSSL_DECODER_CTX_new_for_pkey(&key, "PEM", "PrivateKeyInfo", "RSA", EVP_PKEY_KEYPAIR, NULL, NULL);
    if (context == NULL) return NULL;
    if (OSSL_DECODER_from_bio(context, bio) != 1) { EVP_PKEY_free(key); key = NULL; }
    OSSL_DECODER_CTX_free(context);
    return key;
}

/* ECDSA signatures come out of EVP_DigestSign as DER (SEQUENCE of two INTEGERs); JOSE (ES256)
   wants r and s as fixed-width big-endian halves. Both directions, `half` bytes each (32 for P-256). */
static inline int herald_ecdsa_der_to_raw(const unsigned char *der, long der_length, unsigned char *raw, int half) {
    const unsigned char *cursor = der;
    ECDSA_SIG *signature = d2i_ECDSA_SIG(NULL, &cursor, der_length);
    if (signature == NULL) return 0;
    const BIGNUM *r = NULL, *s = NULL;
    ECDSA_SIG_get0(signature, &r, &s);
    int ok = cursor == der + der_length
        && BN_bn2binpad(r, raw, half) == half && BN_bn2binpad(s, raw + half, half) == half;
    ECDSA_SIG_free(signature);
    return ok;
}

/* Returns the DER length written into `der` (at most `capacity`), or 0. */
static inline int herald_ecdsa_raw_to_der(const unsigned char *raw, int half, unsigned char *der, int capacity) {
    ECDSA_SIG *signature = ECDSA_SIG_new();
    BIGNUM *r = BN_bin2bn(raw, half, NULL);
    BIGNUM *s = BN_bin2bn(raw + half, half, NULL);
    if (signature == NULL || r == NULL || s == NULL || ECDSA_SIG_set0(signature, r, s) != 1) {
        BN_free(r); BN_free(s); ECDSA_SIG_free(signature);
        return 0;
    }
    int length = i2d_ECDSA_SIG(signature, NULL);
    if (length <= 0 || length > capacity) { ECDSA_SIG_free(signature); return 0; }
    unsigned char *cursor = der;
    length = i2d_ECDSA_SIG(signature, &cursor);
    ECDSA_SIG_free(signature);
    return length;
}
#endif
