package shortcode

import (
	"crypto/sha256"
	"encoding/binary"
	"math/bits"
	"strconv"
)

// alphabet is Base58 without 0, O, I and l; alphabet[0] == '1' is the zero
// digit, so left-padding with '1' is the same as leading zero digits.
const alphabet = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"

const (
	// pow58x10 = 58^10 < 2^64: a 128-bit number is split into 10-digit
	// chunks with two 64-bit divisions each instead of 22 divisions by 58.
	pow58x10 = 430804206899405824
	// digits128 is the number of Base58 digits of the largest uint128:
	// 58^21 < 2^128 <= 58^22.
	digits128 = 22
)

// HashInput is the SHA-256 input (Hash input in the package doc):
// canonical "|" namespace, plus "|" salt for salts other than 0.
// Salts are 0..MaxSalt; other values are written in decimal all the same.
func HashInput(canonical, namespace string, salt int) string {
	return string(appendHashInput(nil, canonical, namespace, salt))
}

func appendHashInput(b []byte, canonical, namespace string, salt int) []byte {
	b = append(b, canonical...)
	b = append(b, '|')
	b = append(b, namespace...)
	if salt != 0 {
		b = appendSalt(b, salt)
	}
	return b
}

// appendSalt appends the "|salt" suffix of a retry's hash input.
func appendSalt(b []byte, salt int) []byte {
	return strconv.AppendInt(append(b, '|'), int64(salt), 10)
}

// Code is the short code of a canonical URL in a namespace at a salt
// (Code derivation in the package doc).
func Code(canonical, namespace string, salt int) string {
	var buf [stackBuf]byte // the hash input stays on the stack for typical URLs
	c := codeOf(sha256.Sum256(appendHashInput(buf[:0], canonical, namespace, salt)))
	return string(c[:])
}

// Codes returns the codes for salts 0..MaxSalt, in salt order.
func Codes(canonical, namespace string) [MaxSalt + 1]string {
	var buf [stackBuf]byte
	base := appendHashInput(buf[:0], canonical, namespace, 0)
	n := len(base)
	var all [(MaxSalt + 1) * Length]byte
	for salt := 0; salt <= MaxSalt; salt++ {
		// The canonical|namespace prefix is built once; each salt adds its suffix.
		in := base[:n]
		if salt != 0 {
			in = appendSalt(in, salt)
		}
		c := codeOf(sha256.Sum256(in))
		copy(all[salt*Length:], c[:])
	}
	// One allocation for all ten codes; each is a substring of it.
	s := string(all[:])
	var codes [MaxSalt + 1]string
	for i := range codes {
		codes[i] = s[i*Length : (i+1)*Length]
	}
	return codes
}

func codeOf(digest [sha256.Size]byte) [Length]byte {
	return encode128(binary.BigEndian.Uint64(digest[0:8]), binary.BigEndian.Uint64(digest[8:16]))
}

// encode128 writes the 128-bit number hi:lo in Base58, left-pads it with '1'
// to at least Length digits and keeps the first Length.
func encode128(hi, lo uint64) [Length]byte {
	var d [digits128]byte // fixed width: leading zero digits are '1'
	hi, lo, low := divmod128(hi, lo, pow58x10)
	_, top, mid := divmod128(hi, lo, pow58x10) // top < 58^2: its high word is 0
	putChunk(d[:digits128-20], top)
	putChunk(d[digits128-20:digits128-10], mid)

	// First significant digit, but never fewer than Length digits: that is
	// the left padding with '1'. The scan stays within top and mid.
	first := 0
	for first < digits128-Length && d[first] == alphabet[0] {
		first++
	}
	// The low chunk is needed only below 58^19 (odds about 1 in 100,000),
	// so its ten divisions are almost always skipped.
	if first+Length > digits128-10 {
		putChunk(d[digits128-10:], low)
	}
	return [Length]byte(d[first : first+Length])
}

// divmod128 divides hi:lo by d (d != 0), returning quotient and remainder.
func divmod128(hi, lo, d uint64) (qhi, qlo, r uint64) {
	qhi = hi / d
	qlo, r = bits.Div64(hi%d, lo, d)
	return qhi, qlo, r
}

// putChunk writes v in Base58 into dst, most significant digit first,
// zero-padded to len(dst).
func putChunk(dst []byte, v uint64) {
	for i := len(dst) - 1; i >= 0; i-- {
		dst[i] = alphabet[v%58]
		v /= 58
	}
}
