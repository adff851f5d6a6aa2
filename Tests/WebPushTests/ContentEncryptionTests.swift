import Transport
import XCTest

@testable import WebPush

final class ContentEncryptionTests: XCTestCase {
    func b64(_ s: String) -> [UInt8] { Base64URL.decode(Array(s.utf8))! }

    /// RFC 8291 Appendix A: the example message decrypts to its plaintext, and encrypting the
    /// plaintext with the example's sender key and salt gives the example's body.
    func testRFC8291AppendixA() throws {
        let ua = try XCTUnwrap(P256Key(privateKey: b64("q1dXpw3UpT5VOmu_cf_v6ih07Aems3njxI-JWgLcM94")))
        XCTAssertEqual(ua.publicKey, b64("BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4"))
        let sender = try XCTUnwrap(P256Key(privateKey: b64("yfWPiYE-n46HLnH0KqZOF1fJJU3MYrct3AELtAQ-oRw")))
        XCTAssertEqual(
            sender.publicKey, b64("BP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3jl7A8"))
        XCTAssertEqual(ua.sharedSecret(with: sender), b64("kyrL1jIIOHEzg3sM2ZWRHDRB62YACZhhSlknJ672kSs"))
        let auth = b64("BTBZMqHH6r4Tts7J_aSIgg")
        let body = b64(
            "DGv6ra1nlYgDCS1FRnbzlwAAEABBBP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3jl7A_yl95bQpu6cVPTpK4Mqgkf1CXztLVBSt2Ks3oZwbuwXPXLWyouBWLVWGNWQexSgSxsj_Qulcy4a-fN"
        )
        let keys = SubscriptionKeys(key: ua, auth: auth)
        XCTAssertEqual(
            try ContentEncryption.decrypt(aes128gcm: body[...], keys: keys).get(), Array("When I grow up, I want to be a watermelon".utf8))
        let made = ContentEncryption.encrypt(
            Array("When I grow up, I want to be a watermelon".utf8), uaPublic: ua.publicKey, auth: auth,
            salt: b64("DGv6ra1nlYgDCS1FRnbzlw"), sender: sender)
        XCTAssertEqual(made, body)
    }

    /// Both codings round-trip with fresh keys; a changed byte, the wrong auth secret, another
    /// subscription's key and a cut body fail with http_ece's reasons.
    func testRoundTripsAndFailures() throws {
        let ua = try XCTUnwrap(P256Key.generate())
        let auth = ContentEncryption.random(16)
        let keys = SubscriptionKeys(key: ua, auth: auth)
        let text = Array(#"{"title":"Sale","body":"50% off"}"#.utf8)
        let body = try XCTUnwrap(ContentEncryption.encrypt(text, uaPublic: ua.publicKey, auth: auth))
        XCTAssertEqual(body.count, 86 + text.count + 1 + 16)
        XCTAssertEqual(try ContentEncryption.decrypt(aes128gcm: body[...], keys: keys).get(), text)
        var flipped = body
        flipped[body.count - 3] ^= 1
        XCTAssertThrowsError(try ContentEncryption.decrypt(aes128gcm: flipped[...], keys: keys).get()) {
            XCTAssertTrue("\($0)".hasPrefix("Decryption error"), "\($0)")
        }
        let other = SubscriptionKeys(key: try XCTUnwrap(P256Key.generate()), auth: auth)
        XCTAssertThrowsError(try ContentEncryption.decrypt(aes128gcm: body[...], keys: other).get())
        XCTAssertThrowsError(
            try ContentEncryption.decrypt(aes128gcm: body[...], keys: SubscriptionKeys(key: ua, auth: ContentEncryption.random(16))).get())
        XCTAssertThrowsError(try ContentEncryption.decrypt(aes128gcm: body.prefix(20), keys: keys).get()) {
            XCTAssertEqual("\($0)", "Could not parse the content header")
        }

        let legacy = try XCTUnwrap(ContentEncryption.encryptAESGCM(text, uaPublic: ua.publicKey, auth: auth))
        XCTAssertEqual(
            try ContentEncryption.decrypt(aesgcm: legacy.body[...], salt: legacy.salt, senderKey: legacy.dh, keys: keys).get(), text)
        XCTAssertThrowsError(
            try ContentEncryption.decrypt(aesgcm: legacy.body[...], salt: ContentEncryption.random(16), senderKey: legacy.dh, keys: keys)
                .get())
    }

    /// Keys: a point off the curve, a zero or too-large scalar, and wrong lengths are refused.
    func testKeysAreChecked() throws {
        let good = try XCTUnwrap(P256Key.generate())
        var off = good.publicKey
        off[64] ^= 1
        XCTAssertNil(P256Key(publicKey: off))
        XCTAssertNil(P256Key(publicKey: Array(good.publicKey.prefix(64))))
        XCTAssertNil(P256Key(privateKey: [UInt8](repeating: 0, count: 32)))
        XCTAssertNil(P256Key(privateKey: [UInt8](repeating: 0xFF, count: 32)))
        let again = try XCTUnwrap(P256Key(privateKey: try XCTUnwrap(good.privateKey)))
        XCTAssertEqual(again.publicKey, good.publicKey)
        let sig = try XCTUnwrap(good.sign(Array("abc".utf8)))
        XCTAssertTrue(try XCTUnwrap(P256Key(publicKey: good.publicKey)).verify(signature: sig[...], of: Array("abc".utf8)[...]))
        XCTAssertFalse(good.verify(signature: sig[...], of: Array("abd".utf8)[...]))
    }
}
