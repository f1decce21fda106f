#!/usr/bin/env python3
"""Manual pages made from the texts they document, so the two cannot drift.

  man.py help NAME SECTION SUMMARY VERSION -- PROGRAM [ARGS...]
      a page whose DESCRIPTION is PROGRAM's help output, verbatim
  man.py markdown NAME SECTION SUMMARY VERSION FILE
  man.py markdown NAME SECTION SUMMARY VERSION -- PROGRAM [ARGS...]
      a page converted from a Markdown guide, or from the Markdown a
      program prints (headings, paragraphs, lists, tables and code blocks;
      inline code in bold): kvrt(1) is `kvrt --man-source` converted

The page goes to stdout.  This is the tree's one roff writer.
"""
import re
import subprocess
import sys

TITLES = {'1': 'User Commands', '7': 'Miscellanea'}


def escape(text):
    """roff text: backslashes and hyphens escaped, no line read as a request."""
    text = text.replace('\\', '\\e').replace('-', '\\-')
    return '\n'.join('\\&' + line if line.startswith(('.', "'")) else line
                     for line in text.split('\n'))


def inline(text):
    """Markdown inline markup to roff: `code` and **strong** in bold, links as their text."""
    text = re.sub(r'\[([^\]]+)\]\([^)]+\)', r'\1', text)
    parts = re.split(r'(`[^`]+`|\*\*[^*]+\*\*)', text)
    out = []
    for p in parts:
        if p.startswith('`') and p.endswith('`') and len(p) > 1:
            out.append('\\fB' + escape(p[1:-1]) + '\\fR')
        elif p.startswith('**') and p.endswith('**') and len(p) > 3:
            out.append('\\fB' + escape(p[2:-2]) + '\\fR')
        else:
            out.append(escape(p))
    return ''.join(out)


def header(name, section, summary, version):
    return ('.TH %s %s "" "kvrt %s" "%s"\n.SH NAME\n%s \\- %s\n'
            % (name.upper().replace('-', '\\-'), section, version, TITLES.get(section, ''),
               escape(name), escape(summary)))


def verbatim(text):
    return '.nf\n' + escape(text.rstrip('\n')) + '\n.fi\n'


def from_markdown(text):
    out = []
    lines = text.split('\n')
    i = 0
    para = []

    def flush():
        if para:
            out.append('.PP\n' + inline(' '.join(para)) + '\n')
            para.clear()

    while i < len(lines):
        line = lines[i]
        if line.startswith('```'):
            flush()
            i += 1
            block = []
            while i < len(lines) and not lines[i].startswith('```'):
                block.append(lines[i])
                i += 1
            out.append('.PP\n.RS 4\n' + verbatim('\n'.join(block)) + '.RE\n')
        elif line.startswith('# '):
            flush()  # the title is in NAME; what follows describes
            out.append('.SH DESCRIPTION\n')
        elif line.startswith('## '):
            flush()
            out.append('.SH ' + inline(line[3:].strip()).upper() + '\n')
        elif line.startswith('### '):
            flush()
            out.append('.SS ' + inline(line[4:].strip()) + '\n')
        elif line.startswith('|'):
            flush()
            rows = []
            while i < len(lines) and lines[i].startswith('|'):
                cells = [c.strip() for c in lines[i].strip().strip('|').split('|')]
                if not all(re.fullmatch(r':?-+:?', c) for c in cells if c):
                    rows.append(cells)
                i += 1
            i -= 1
            for cells in rows:
                out.append('.TP\n' + inline(cells[0]) + '\n' + inline(' \u2014 '.join(cells[1:])) + '\n')
        elif re.match(r'^\s*(- |\d+\. )', line):
            flush()
            item = [re.sub(r'^\s*(- |\d+\. )', '', line)]
            while i + 1 < len(lines) and lines[i + 1].startswith('  ') and lines[i + 1].strip():
                i += 1
                item.append(lines[i].strip())
            out.append('.IP \\(bu 2\n' + inline(' '.join(item)) + '\n')
        elif not line.strip():
            flush()
        else:
            para.append(line.strip())
        i += 1
    flush()
    return ''.join(out)


def program_output(argv):
    return subprocess.run(argv, check=True, stdout=subprocess.PIPE).stdout.decode()


def main(argv):
    if len(argv) < 7 or argv[1] not in ('help', 'markdown'):
        sys.stderr.write(__doc__)
        return 2
    mode, name, section, summary, version = argv[1:6]
    page = header(name, section, summary, version)
    from_program = argv[6] == '--'
    if from_program and len(argv) < 8:
        sys.stderr.write('man.py: -- needs PROGRAM [ARGS...]\n')
        return 2
    if mode == 'help':
        if not from_program:
            sys.stderr.write('man.py: help needs -- PROGRAM [ARGS...]\n')
            return 2
        page += '.SH DESCRIPTION\n' + verbatim(program_output(argv[7:]))
    elif from_program:
        page += from_markdown(program_output(argv[7:]))
    else:
        with open(argv[6], encoding='utf-8') as f:
            page += from_markdown(f.read())
    sys.stdout.write(page)
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
