import Faults
import PushCore

extension Emulator {
    /// The fault engine with what the configuration starts with: the latency profile,
    /// `--fcm-overload`, rules from `--faults FILE` and a scenario from `--scenario FILE` (a bad
    /// file fails the start).
    static func makeFaults(_ configuration: EmulatorConfiguration, scenarios: ScenarioRegistry) throws -> FaultEngine {
        var shaping = FaultEngine.Shaping()
        for (provider, distribution) in configuration.latency { shaping.latency[provider.index] = distribution }
        let faults = FaultEngine(loops: configuration.threads, shaping: shaping, allowOverrideHeader: configuration.allowOverrideHeader)
        if configuration.fcmOverloadPercent > 0 {
            var match = FaultMatch()
            match.provider = .fcm
            match.percent = configuration.fcmOverloadPercent
            var effect = FaultEffect()
            effect.errorCode = "UNAVAILABLE"
            effect.retryAfter = 2
            faults.add(
                FaultRule(
                    id: faults.newID(), match: match, effect: effect, seed: 0, createdAtMs: Clock.nowMs(),
                    matchJSON: "{\"provider\":\"fcm\",\"percent\":\(configuration.fcmOverloadPercent)}",
                    effectJSON: "{\"errorCode\":\"UNAVAILABLE\",\"retryAfter\":2}"))
        }
        if let path = configuration.faultsFile {
            do {
                let rules = try FaultParser.rules(try Emulator.readFile(path, what: "faults"), nowMs: Clock.nowMs(), id: { faults.newID() })
                for rule in rules { faults.add(rule) }
            } catch let error as ConfigurationError {
                throw error
            } catch {
                throw ConfigurationError("--faults \(path): \(error)")
            }
        }
        if let path = configuration.scenarioFile {
            do {
                let scenario = try Scenario.parse(
                    try Emulator.readFile(path, what: "scenario"), id: scenarios.newID(),
                    nowMs: Clock.nowMs(), ruleID: { faults.newID() })
                scenarios.add(scenario, to: faults)
            } catch let error as ConfigurationError {
                throw error
            } catch {
                throw ConfigurationError("--scenario \(path): \(error)")
            }
        }
        return faults
    }
}
