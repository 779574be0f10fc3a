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
#include <openssl/core_names.h>
#include <openssl/param_build.h>

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

/* A P-256 public key from its uncompressed point (0x04 || x || y, 65 bytes), its curve copied
   from `like` (any P-256 key): four times cheaper than building the group from its name for
   every key (10 against 38 µs), and a sender reads a browser's key for every message. NULL
   unless the bytes are a point on the curve: decoding the point checks that it lies on it. */
static inline EVP_PKEY *herald_p256_from_point(EVP_PKEY *like, const unsigned char *point, size_t length) {
    EVP_PKEY *key = EVP_PKEY_new();
    if (key == NULL) return NULL;
    if (EVP_PKEY_copy_parameters(key, like) != 1 || EVP_PKEY_set1_encoded_public_key(key, point, length) != 1) {
        EVP_PKEY_free(key);
        return NULL;
    }
    return key;
}

/* A fresh key pair on the curve of `like`: half the work of EVP_EC_gen("P-256") (28 against
   50 µs), which looks the curve up by name each time. */
static inline EVP_PKEY *herald_p256_generate_like(EVP_PKEY *like) {
    EVP_PKEY_CTX *context = EVP_PKEY_CTX_new(like, NULL);
    if (context == NULL) return NULL;
    EVP_PKEY *key = NULL;
    if (EVP_PKEY_keygen_init(context) != 1 || EVP_PKEY_keygen(context, &key) != 1) key = NULL;
    EVP_PKEY_CTX_free(context);
    return key;
}

/* A P-256 key pair from its private scalar (32 big-endian bytes), the public point computed
   from it; for known-answer tests, whose keys are published as raw scalars. */
static inline EVP_PKEY *herald_p256_from_scalar(const unsigned char *scalar) {
    EVP_PKEY *key = NULL;
    unsigned char point[65];
    EC_GROUP *group = EC_GROUP_new_by_curve_name(NID_X9_62_prime256v1);
    EC_POINT *public_point = group ? EC_POINT_new(group) : NULL;
    BIGNUM *d = BN_bin2bn(scalar, 32, NULL);
    OSSL_PARAM_BLD *builder = OSSL_PARAM_BLD_new();
    OSSL_PARAM *params = NULL;
    EVP_PKEY_CTX *context = EVP_PKEY_CTX_new_from_name(NULL, "EC", NULL);
    if (group && public_point && d && builder && context
        && EC_POINT_mul(group, public_point, d, NULL, NULL, NULL) == 1
        && EC_POINT_point2oct(group, public_point, POINT_CONVERSION_UNCOMPRESSED, point, sizeof point, NULL) == sizeof point
        && OSSL_PARAM_BLD_push_utf8_string(builder, OSSL_PKEY_PARAM_GROUP_NAME, "prime256v1", 0) == 1
        && OSSL_PARAM_BLD_push_BN(builder, OSSL_PKEY_PARAM_PRIV_KEY, d) == 1
        && OSSL_PARAM_BLD_push_octet_string(builder, OSSL_PKEY_PARAM_PUB_KEY, point, sizeof point) == 1
        && (params = OSSL_PARAM_BLD_to_param(builder)) != NULL
        && EVP_PKEY_fromdata_init(context) == 1) {
        if (EVP_PKEY_fromdata(context, &key, EVP_PKEY_KEYPAIR, params) != 1) key = NULL;
    }
    EVP_PKEY_CTX_free(context);
    OSSL_PARAM_free(params);
    OSSL_PARAM_BLD_free(builder);
    BN_clear_free(d);
    EC_POINT_free(public_point);
    EC_GROUP_free(group);
    return key;
}

/* An HMAC-SHA256 context with its digest set, made once: each HMAC copies it, which spares the
   look-up of the MAC and digest by name that a fresh context (or EVP_KDF's HKDF, 5.5 µs a step)
   pays every time. */
static inline EVP_MAC_CTX *herald_hmac_sha256_template(void) {
    EVP_MAC *mac = EVP_MAC_fetch(NULL, "HMAC", NULL);
    if (mac == NULL) return NULL;
    EVP_MAC_CTX *context = EVP_MAC_CTX_new(mac);
    EVP_MAC_free(mac);
    if (context == NULL) return NULL;
    OSSL_PARAM params[2];
    params[0] = OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, (char *)"SHA256", 0);
    params[1] = OSSL_PARAM_construct_end();
    if (EVP_MAC_CTX_set_params(context, params) != 1) { EVP_MAC_CTX_free(context); return NULL; }
    return context;
}

/* HMAC-SHA256 of `first` then `second` (either may be empty) under `key`, 32 bytes into `out`,
   from a copy of `template`. 1 on success. */
static inline int herald_hmac_sha256(const EVP_MAC_CTX *template, const unsigned char *key, size_t key_length,
                                     const unsigned char *first, size_t first_length,
                                     const unsigned char *second, size_t second_length, unsigned char *out) {
    EVP_MAC_CTX *context = EVP_MAC_CTX_dup(template);
    if (context == NULL) return 0;
    size_t written = 0;
    int ok = EVP_MAC_init(context, key, key_length, NULL) == 1
        && (first_length == 0 || EVP_MAC_update(context, first, first_length) == 1)
        && (second_length == 0 || EVP_MAC_update(context, second, second_length) == 1)
        && EVP_MAC_final(context, out, &written, 32) == 1 && written == 32;
    EVP_MAC_CTX_free(context);
    return ok;
}

/* EVP_CTRL_GCM_SET_TAG / GET_TAG through one function each (the ctrl takes a void pointer). */
static inline int herald_gcm_get_tag(EVP_CIPHER_CTX *context, unsigned char *tag, int length) {
    return EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_GCM_GET_TAG, length, tag);
}
static inline int herald_gcm_set_tag(EVP_CIPHER_CTX *context, const unsigned char *tag, int length) {
    return EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_GCM_SET_TAG, length, (void *)tag);
}
#endif
