"""Platform adapters: translate events to QuizService calls and render its Messages. No rules here."""
