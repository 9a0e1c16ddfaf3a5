//! USDT argument specs (x86-64, GNU as operand syntax), as `<sys/sdt.h>` writes them in the
//! note: `SIZE@OPERAND` separated by spaces, SIZE negative for signed values (`-4@%edi`), the
//! operand a register (`%rbx`), a constant (`$5`) or memory (`-16(%rbp)`,
//! `8(%rax,%rdx,4)`). What the eBPF side can evaluate from `struct pt_regs` is accepted;
//! anything else (symbolic or %rip-relative memory, segment overrides, high-byte registers)
//! is refused by name rather than read wrongly.

/// Where one argument's value is at the probe site.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operand {
    Const(i64),
    /// Register, by its offset in `struct pt_regs`.
    Reg(u32),
    Mem {
        base: u32,
        /// (register offset, scale)
        index: Option<(u32, u32)>,
        disp: i64,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Arg {
    /// Bytes: 1, 2, 4 or 8.
    pub size: u32,
    pub signed: bool,
    pub operand: Operand,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("argument {spec:?}: {why}")]
pub struct ArgError {
    pub spec: String,
    pub why: String,
}

/// Offsets in x86-64 `struct pt_regs` (arch/x86/include/asm/ptrace.h), by 64-bit name.
const PT_REGS: &[(&str, u32)] = &[
    ("r15", 0),
    ("r14", 8),
    ("r13", 16),
    ("r12", 24),
    ("rbp", 32),
    ("rbx", 40),
    ("r11", 48),
    ("r10", 56),
    ("r9", 64),
    ("r8", 72),
    ("rax", 80),
    ("rcx", 88),
    ("rdx", 96),
    ("rsi", 104),
    ("rdi", 112),
    ("rip", 128),
    ("rsp", 152),
];

/// A register name (without `%`) as (pt_regs offset, width in bytes). The narrower names
/// are the low bytes of their 64-bit register (little-endian), so they share its offset.
pub fn register(name: &str) -> Option<(u32, u32)> {
    let full = |n: &str| PT_REGS.iter().find(|r| r.0 == n).map(|r| r.1);
    if let Some(o) = full(name) {
        return Some((o, 8));
    }
    // r8..r15 with d/w/b suffixes.
    if let Some(num) = name.strip_prefix('r') {
        for (suffix, width) in [("d", 4), ("w", 2), ("b", 1)] {
            if let Some(n) = num.strip_suffix(suffix)
                && let Some(o) = full(&format!("r{n}"))
                && n.parse::<u8>().is_ok()
            {
                return Some((o, width));
            }
        }
    }
    let legacy: &[(&str, &str, u32)] = &[
        ("eax", "rax", 4),
        ("ax", "rax", 2),
        ("al", "rax", 1),
        ("ebx", "rbx", 4),
        ("bx", "rbx", 2),
        ("bl", "rbx", 1),
        ("ecx", "rcx", 4),
        ("cx", "rcx", 2),
        ("cl", "rcx", 1),
        ("edx", "rdx", 4),
        ("dx", "rdx", 2),
        ("dl", "rdx", 1),
        ("esi", "rsi", 4),
        ("si", "rsi", 2),
        ("sil", "rsi", 1),
        ("edi", "rdi", 4),
        ("di", "rdi", 2),
        ("dil", "rdi", 1),
        ("ebp", "rbp", 4),
        ("bp", "rbp", 2),
        ("bpl", "rbp", 1),
        ("esp", "rsp", 4),
        ("sp", "rsp", 2),
        ("spl", "rsp", 1),
    ];
    let (_, full_name, width) = legacy.iter().find(|l| l.0 == name)?;
    Some((full(full_name)?, *width))
}

fn int(s: &str) -> Option<i64> {
    let (neg, digits) = match s.strip_prefix('-') {
        Some(d) => (true, d),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    let v = match digits
        .strip_prefix("0x")
        .or_else(|| digits.strip_prefix("0X"))
    {
        Some(h) => u64::from_str_radix(h, 16).ok()?,
        None => digits.parse::<u64>().ok()?,
    };
    // Constants are 64-bit patterns: 0xffffffffffffffff and -1 are the same value.
    Some(if neg {
        (v as i64).wrapping_neg()
    } else {
        v as i64
    })
}

/// Parse the space-separated argument specs of one probe.
pub fn parse_args(specs: &str) -> Result<Vec<Arg>, ArgError> {
    specs.split_ascii_whitespace().map(parse_arg).collect()
}

/// Parse one `SIZE@OPERAND` (or a bare operand, sized by its register).
pub fn parse_arg(spec: &str) -> Result<Arg, ArgError> {
    let err = |why: &str| ArgError {
        spec: spec.to_string(),
        why: why.to_string(),
    };
    let (size, operand) = match spec.split_once('@') {
        Some((s, o)) => {
            let n: i32 = s.parse().map_err(|_| err("the size is not a number"))?;
            (Some(n), o)
        }
        None => (None, spec),
    };
    let reg = |name: &str| -> Result<(u32, u32), ArgError> {
        let r = name
            .strip_prefix('%')
            .ok_or_else(|| err(&format!("{name:?} is not a register")))?;
        if ["ah", "bh", "ch", "dh"].contains(&r) {
            return Err(err("high-byte registers are not supported"));
        }
        if r == "rip" {
            return Err(err("%rip-relative operands are not supported"));
        }
        register(r).ok_or_else(|| err(&format!("unknown register %{r}")))
    };
    let (operand, natural) = if let Some(c) = operand.strip_prefix('$') {
        let v = int(c).ok_or_else(|| {
            err("the constant is not a number (symbolic constants are not supported)")
        })?;
        (Operand::Const(v), 8)
    } else if operand.starts_with('%') {
        if operand.contains(':') {
            return Err(err("segment registers are not supported"));
        }
        let (off, w) = reg(operand)?;
        (Operand::Reg(off), w)
    } else if let Some(open) = operand.find('(') {
        let inner = operand[open + 1..]
            .strip_suffix(')')
            .ok_or_else(|| err("memory operand without a closing parenthesis"))?;
        let disp_text = &operand[..open];
        if disp_text.contains(':') {
            return Err(err("segment overrides are not supported"));
        }
        let disp = if disp_text.is_empty() {
            0
        } else {
            int(disp_text).ok_or_else(|| {
                err("the displacement is not a number (symbolic addresses are not supported)")
            })?
        };
        let parts: Vec<&str> = inner.split(',').map(str::trim).collect();
        let (base, _) = reg(parts[0])?;
        let index = match parts.len() {
            1 => None,
            2 | 3 => {
                let (i, _) = reg(parts[1])?;
                let scale = match parts.get(2) {
                    None => 1,
                    Some(s) => match s.parse::<u32>() {
                        Ok(v @ (1 | 2 | 4 | 8)) => v,
                        _ => return Err(err("the scale must be 1, 2, 4 or 8")),
                    },
                };
                Some((i, scale))
            }
            _ => return Err(err("too many parts in the memory operand")),
        };
        (Operand::Mem { base, index, disp }, 8)
    } else {
        return Err(err("not a register, constant or memory operand"));
    };
    let (size, signed) = match size {
        None => (natural, false),
        Some(n @ (1 | 2 | 4 | 8)) => (n as u32, false),
        Some(n @ (-1 | -2 | -4 | -8)) => ((-n) as u32, true),
        Some(_) => {
            return Err(err(
                "the size must be 1, 2, 4 or 8 bytes (negative: signed)",
            ));
        }
    };
    Ok(Arg {
        size,
        signed,
        operand,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_forms_gcc_and_clang_emit_parse() {
        assert_eq!(
            parse_args("-4@%edi 8@-16(%rbp) 8@$5").unwrap(),
            vec![
                Arg {
                    size: 4,
                    signed: true,
                    operand: Operand::Reg(112)
                },
                Arg {
                    size: 8,
                    signed: false,
                    operand: Operand::Mem {
                        base: 32,
                        index: None,
                        disp: -16
                    }
                },
                Arg {
                    size: 8,
                    signed: false,
                    operand: Operand::Const(5)
                },
            ]
        );
        assert_eq!(
            parse_arg("4@(%rax)").unwrap().operand,
            Operand::Mem {
                base: 80,
                index: None,
                disp: 0
            }
        );
        assert_eq!(
            parse_arg("8@0x10(%rsp,%r12,8)").unwrap().operand,
            Operand::Mem {
                base: 152,
                index: Some((24, 8)),
                disp: 16
            }
        );
        assert_eq!(parse_arg("1@%r9b").unwrap().operand, Operand::Reg(64));
        assert_eq!(parse_arg("-2@%r14w").unwrap().size, 2);
        assert_eq!(parse_arg("8@$-1").unwrap().operand, Operand::Const(-1));
        // No size: the register's own width.
        assert_eq!(parse_arg("%esi").unwrap().size, 4);
        assert!(parse_args("").unwrap().is_empty());
    }

    #[test]
    fn what_cannot_be_evaluated_is_refused_by_name() {
        for (spec, why) in [
            ("8@counter(%rip)", "symbolic"),
            ("8@16(%rip)", "%rip-relative"),
            ("1@%ah", "high-byte"),
            ("8@%fs:16", "segment"),
            ("8@%fs:16(%rax)", "segment"),
            ("3@%rax", "size must be"),
            ("x@%rax", "size is not a number"),
            ("8@%foo", "unknown register"),
            ("8@-8(%rbp", "closing parenthesis"),
            ("8@-8(%rbp,%rax,3)", "scale"),
            ("8@(%rbp,%rax,2,1)", "too many"),
            ("8@$sym", "symbolic constants"),
            ("8@rax", "not a register"),
            ("8@(rax)", "not a register"),
        ] {
            let e = parse_arg(spec).expect_err(spec);
            assert!(e.to_string().contains(why), "{spec}: {e}");
        }
    }
}
