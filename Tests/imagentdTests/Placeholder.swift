import Testing
@testable import imagentd

@Test func executableTargetIsTestable() {
    #expect(Bool(true))
}
