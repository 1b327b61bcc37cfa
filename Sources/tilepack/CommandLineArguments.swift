import ArgumentParser
import TilepackCore
import TilepackOperations

/// What happens to the command line before ArgumentParser parses it, and to errors after, the
/// same for every command (``Tilepack/launch(_:)`` applies it; tests parse through ``parse(_:)``).
enum CommandLineArguments {
    /// The arguments as ArgumentParser should see them: negative values joined to their options.
    /// - Throws: `ValidationError` for a first word that is no subcommand, with "did you mean".
    static func prepare(_ arguments: [String], for root: any ParsableCommand.Type) throws -> [String] {
        try checkSubcommand(arguments, of: root)
        return joiningNegativeValues(arguments)
    }

    /// Parses as `tilepack` itself does (for tests).
    static func parse(_ arguments: [String]) throws -> any ParsableCommand {
        try Tilepack.parseAsRoot(prepare(arguments, for: Tilepack.self))
    }

    // MARK: Negative values

    /// `--bbox -10,40,8,47` becomes `--bbox=-10,40,8,47`, for every long option of every command.
    ///
    /// ArgumentParser takes a word that starts with `-` for an option, so without this a
    /// coordinate west of Greenwich or south of the equator fails with "Missing value for
    /// '--bbox <bbox>'" and only the `=` form works. Joining the value here is the one mechanism
    /// for all options that take numbers (`--bbox`, `--center`, and those of commands still to
    /// come): an `@Option` needs no `parsing:` argument of its own, and a new command gets
    /// negative values by taking its coordinates as ``BoundingBoxArgument`` or
    /// ``CoordinateArgument``. A word is joined when it follows a `--name` (without `=`) and
    /// looks like a negative number (`-7`, `-.5`, `-10,40,...`); nothing after `--` is touched.
    static func joiningNegativeValues(_ arguments: [String]) -> [String] {
        var result: [String] = []
        result.reserveCapacity(arguments.count)
        var index = 0
        while index < arguments.count {
            let word = arguments[index]
            if word == "--" {
                result += arguments[index...]
                break
            }
            if word.hasPrefix("--"), !word.contains("="), index + 1 < arguments.count,
                looksNegative(arguments[index + 1])
            {
                result.append(word + "=" + arguments[index + 1])
                index += 2
                continue
            }
            result.append(word)
            index += 1
        }
        return result
    }

    /// `-7`, `-0.5`, `-.5`, `-10,40,8,47`: a minus and then a digit (or a point and a digit).
    static func looksNegative(_ word: String) -> Bool {
        var characters = word.utf8.dropFirst(0)
        guard characters.popFirst() == UInt8(ascii: "-") else { return false }
        if characters.first == UInt8(ascii: ".") { characters = characters.dropFirst() }
        guard let first = characters.first else { return false }
        return (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(first)
    }

    // MARK: Subcommands

    /// A first word that names no subcommand of `root` is an error that suggests the nearest
    /// one. ArgumentParser 1.8.2 suggests options ("Did you mean '--force'?") but for a
    /// subcommand only says "Unexpected argument".
    static func checkSubcommand(_ arguments: [String], of root: any ParsableCommand.Type) throws {
        guard let word = arguments.first, !word.hasPrefix("-") else { return }
        let subcommands = root.configuration.subcommands
        guard !subcommands.isEmpty else { return }
        var commandNames: [String] = []
        var names = ["help"]
        for subcommand in subcommands {
            commandNames.append(subcommand._commandName)
            names += [subcommand._commandName] + subcommand.configuration.aliases
        }
        if names.contains(word) { return }
        let commands = commandNames.joined(separator: ", ")
        if let nearest = suggestion(for: word, among: names) {
            throw ValidationError("'\(word)' is not a \(root._commandName) command. Did you mean '\(nearest)'? (commands: \(commands))")
        }
        throw ValidationError("'\(word)' is not a \(root._commandName) command (commands: \(commands))")
    }

    /// The name nearest to `word`: one it begins (`imp` -> `import`), or one within a few edits
    /// (a third of the word's length, at least one; a swap of neighbours is one edit).
    static func suggestion(for word: String, among names: [String]) -> String? {
        let lowered = word.lowercased()
        if lowered.count >= 2, let prefixed = names.first(where: { $0.hasPrefix(lowered) }) { return prefixed }
        let limit = max(1, lowered.count / 3)
        let scored = names.map { (name: $0, distance: editDistance(lowered, $0)) }
        guard let best = scored.min(by: { $0.distance < $1.distance }), best.distance <= limit else { return nil }
        return best.name
    }

    /// Optimal string alignment distance: insertions, deletions, substitutions and swaps of
    /// neighbouring characters each count one.
    static func editDistance(_ a: String, _ b: String) -> Int {
        let a = Array(a), b = Array(b)
        if a.isEmpty { return b.count }
        if b.isEmpty { return a.count }
        var d = [[Int]](repeating: [Int](repeating: 0, count: b.count + 1), count: a.count + 1)
        for i in 0...a.count { d[i][0] = i }
        for j in 0...b.count { d[0][j] = j }
        for i in 1...a.count {
            for j in 1...b.count {
                let cost = a[i - 1] == b[j - 1] ? 0 : 1
                d[i][j] = min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost)
                if i > 1, j > 1, a[i - 1] == b[j - 2], a[i - 2] == b[j - 1] {
                    d[i][j] = min(d[i][j], d[i - 2][j - 2] + 1)
                }
            }
        }
        return d[a.count][b.count]
    }

    // MARK: Exit status

    /// What the launcher prints after "Error: " and the exit status, for an error a command's
    /// `run()` threw that ArgumentParser's exit would print otherwise: "not an archive" (status 2),
    /// and a `ValidationError`, a refusal like any other (status 1; ArgumentParser would add the
    /// usage line, and the command line was well formed), so that no command can print usage
    /// under a run-time failure. `nil` for the rest, which ArgumentParser's exit prints as it
    /// should: any other error as "Error: ..." with status 1, and its own (the help that its
    /// `help` command and `--help` throw from run(), `CleanExit`, `ExitCode`).
    static func refusal(for error: any Error) -> (message: String, status: Int32)? {
        if let status = exitStatus(for: error) { return ("\(error)", status) }
        if let validation = error as? ValidationError { return (validation.message, 1) }
        return nil
    }

    /// Exit status 2, "not an archive", for an input of another kind in every command (as
    /// `verify` reports it); `nil` for errors ArgumentParser's own exit handles.
    static func exitStatus(for error: any Error) -> Int32? {
        let fault: TileArchiveError.Fault? =
            switch error {
            case let error as OperationError: if case .archive(let archive) = error.fault { archive.fault } else { nil }
            case let error as TileArchiveError: error.fault
            default: nil
            }
        switch fault {
        // A version tilepack does not read (PMTiles v2 or v4, a bundle 2.x) is not a usable archive either.
        case .notAnArchive?, .missingTable?, .unsupportedVersion?: return VerifyReport.notAnArchiveStatus
        default: return nil
        }
    }
}
