import APNs
import FCM
import Faults
import PushCore
import Runtime

extension Emulator {
    /// The fault engine with the configuration's latency profile (its rules come from the state
    /// log, then `addConfiguredFaults`).
    static func makeFaultEngine(_ configuration: EmulatorConfiguration) -> FaultEngine {
        var shaping = FaultEngine.Shaping()
        for (provider, distribution) in configuration.latency { shaping.latency[provider.index] = distribution }
        return FaultEngine(
            loops: configuration.threads, shaping: shaping, allowOverrideHeader: configuration.allowOverrideHeader,
            vocabulary: FaultVocabulary(
                reasons: APNsReason.allCases.map(\.rawValue), errorCodes: FCMErrorCode.allCases.map(\.rawValue)))
    }

    /// What the configuration starts with, at each start and never kept in the state log:
    /// `--fcm-overload`, rules from `--faults FILE` and a scenario from `--scenario FILE` (a bad
    /// file fails the start). They come first, before the rules the state log restored.
    static func addConfiguredFaults(_ configuration: EmulatorConfiguration, to faults: FaultEngine) throws {
        let scenarios = faults.scenarios
        var configured: [FaultRule] = []
        if configuration.fcmOverloadPercent > 0 {
            var match = FaultMatch()
            match.provider = .fcm
            match.percent = configuration.fcmOverloadPercent
            var effect = FaultEffect()
            effect.errorCode = "UNAVAILABLE"
            effect.retryAfter = 2
            configured.append(
                FaultRule(
                    id: faults.newID(), match: match, effect: effect, seed: 0, createdAtMs: Clock.nowMs(),
                    matchJSON: "{\"provider\":\"fcm\",\"percent\":\(configuration.fcmOverloadPercent)}",
                    effectJSON: "{\"errorCode\":\"UNAVAILABLE\",\"retryAfter\":2}", persistent: false))
        }
        if let path = configuration.faultsFile {
            do {
                configured += try FaultParser.rules(
                    try Emulator.readFile(path, what: "faults"), nowMs: Clock.nowMs(), id: { faults.newID() })
            } catch let error as ConfigurationError {
                throw error
            } catch {
                throw ConfigurationError("--faults \(path): \(error)")
            }
        }
        faults.addConfigured(configured)
        if let path = configuration.scenarioFile {
            do {
                var scenario = try Scenario.parse(
                    try Emulator.readFile(path, what: "scenario"), id: scenarios.newID(),
                    nowMs: Clock.nowMs(), ruleID: { faults.newID() }, known: faults.vocabulary)
                scenario.persistent = false
                scenarios.addConfigured(scenario, to: faults)
            } catch let error as ConfigurationError {
                throw error
            } catch {
                throw ConfigurationError("--scenario \(path): \(error)")
            }
        }
    }
}
