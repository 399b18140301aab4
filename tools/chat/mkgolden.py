#!/usr/bin/python3
"""mkgolden.py: renders conversations through the real chat templates under tests/fixtures/chat/
(one tokenizer_config.json per model) the way transformers' apply_chat_template does, and writes
tests/fixtures/chat/goldens.json, which tests/check_chat.c compares with core/session/chat.c byte
for byte. Run by hand after changing a fixture or a conversation (needs Debian's python3-jinja2);
`make test` never runs it.

    /usr/bin/python3 tools/chat/mkgolden.py
"""
import json
import os
import sys

import jinja2
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..')
FIXTURES = os.path.join(ROOT, 'tests', 'fixtures', 'chat')

# The family each fixture's template should be detected as (core/session/chat.h).
MODELS = {
    'qwen2.5': 'chatml',
    'qwen3': 'chatml',
    'llama3': 'llama3',
    'llama2': 'llama2',
    'mistral': 'mistral',
    'tinyllama': 'zephyr',
}

SYSTEM = 'You are a terse assistant.'
CONVERSATIONS = {
    'one_turn': ([('user', 'Hello')], True),
    'one_turn_system': ([('system', SYSTEM), ('user', 'What is 2+2?')], True),
    'three_turns_system': ([('system', SYSTEM), ('user', 'Name a colour.'),
                            ('assistant', 'Blue.'), ('user', 'Another one?'),
                            ('assistant', 'Green.'), ('user', 'Thanks!')], True),
    'unicode_newlines': ([('user', 'Grüße! 日本語で答えて?\nLine two.\n\nLine four.'),
                          ('assistant', 'Ja — 1\n2\n3 🙂'),
                          ('user', 'Tabs\tand "quotes" and \\backslashes\\')], True),
    'padded_content': ([('system', '  spaced system  '), ('user', '  padded user\n'),
                        ('assistant', ' padded reply  '), ('user', 'next')], True),
    'no_generation_prompt': ([('user', 'Hi'), ('assistant', 'Hello!'), ('user', 'Bye')],
                             False),
}


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys)


def environment():
    # As transformers' _compile_jinja_template sets it up.
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[loopcontrols])
    env.filters['tojson'] = tojson
    env.globals['raise_exception'] = raise_exception
    return env


def main():
    env = environment()
    out = []
    for model, family in MODELS.items():
        with open(os.path.join(FIXTURES, model, 'tokenizer_config.json'), encoding='utf-8') as f:
            config = json.load(f)
        template = env.from_string(config['chat_template'])
        specials = {k: config[k] for k in ('bos_token', 'eos_token') if config.get(k)}
        for name, (turns, gen) in CONVERSATIONS.items():
            messages = [{'role': r, 'content': c} for r, c in turns]
            text = template.render(messages=messages, add_generation_prompt=gen, **specials)
            out.append({'model': model, 'format': family, 'conversation': name,
                        'add_generation_prompt': gen, 'messages': messages, 'text': text})
    path = os.path.join(FIXTURES, 'goldens.json')
    with open(path, 'w', encoding='utf-8') as f:
        json.dump(out, f, indent=1, ensure_ascii=False)
        f.write('\n')
    print(f'{path}: {len(out)} renderings of {len(MODELS)} templates')


if __name__ == '__main__':
    sys.exit(main())
