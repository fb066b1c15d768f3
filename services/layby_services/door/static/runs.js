// The runs dashboard: a second view of the page (#runs). See docs/doors/inbox-page.md#views.
// It is driven by the inbox module's page events:
//   layby:signed-in  {token}              the person signed in (or the page reloaded signed in)
//   layby:signed-out                       the token was forgotten
//   layby:view       {view: "inbox"|"runs"} the view shown now
//   layby:frame      {event, id, data}     every frame of the interaction stream
// and asks the inbox module to return to the sign-in form with layby:unauthorized {message}.
