// Package sasl authenticates Kafka clients the way Kafka brokers do
// (KIP-43, KIP-84, KIP-152): the mechanisms PLAIN (RFC 4616) and
// SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677; no channel
// binding, as Kafka's), checked against SCRAM credentials kept as Kafka
// keeps them, never passwords. The listener drives a Session per login
// (SaslHandshake, then SaslAuthenticate tokens). The SCRAM exchange is
// written here to Kafka's rules (ScramSaslServer): as Kafka, it takes a
// client-final nonce that ends with the server's (librdkafka sends its
// own nonce in front of it again), which RFC 5802 libraries refuse.
//
// # The credentials file
//
// One credential a line, for a user and a mechanism, in the form Kafka
// stores a SCRAM credential (ScramCredentialUtils.credentialToString):
//
//	# user  mechanism      credential
//	alice   SCRAM-SHA-256  salt=<base64>,stored_key=<base64>,server_key=<base64>,iterations=8192
//	alice   SCRAM-SHA-512  salt=<base64>,stored_key=<base64>,server_key=<base64>,iterations=8192
//
// Fields are separated by blanks; '#' starts a comment line. salt,
// stored_key and server_key are standard base64 (with padding);
// iterations is from 4096 to 16384, Kafka's bounds. A user name is
// Kafka's SCRAM user name: any characters but blanks here (SCRAM's ','
// and '=' are escaped on the wire, not in the file). "tierd sasl
// credential" makes a line from a password read on standard input. A
// file with any bad line is refused whole, every bad line named.
//
// A PLAIN login is checked against the user's SCRAM credential (SHA-512
// first, else SHA-256): the password is salted and hashed as SCRAM does
// and compared with the stored key, so one file serves both. A user with
// no credential for a SCRAM mechanism cannot log in with it; an unknown
// user's SCRAM exchange runs to its end with a made-up salt and fails
// there, so that a client cannot tell an unknown user from a wrong
// password.
package sasl
